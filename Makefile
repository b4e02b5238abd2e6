# jobmaster: see README.md.
GO      ?= go
BIN     := bin/jobmaster
PKGS    := ./...

.PHONY: build run test test-short bench bench-anchors lint chaos clean screenshots

build:
	$(GO) build -o $(BIN) ./cmd/jobmaster

# A local cluster: 3 masters and 2 executors with a demo job (Ctrl-C stops it).
run: build
	./$(BIN) dev

# Unit, property, in-process cluster and multi-process integration tests.
test: build
	$(GO) test -race -count=1 -timeout 9m $(PKGS)

test-short:
	$(GO) test -short -count=1 $(PKGS)

# Microbenchmarks (go test -bench in fsm/, reconcile/, placement/), then the
# macro benchmarks against real 3-master clusters; docs/BENCHMARKS.md says
# what each figure means. BENCHFLAGS passes more flags to jmbench, e.g.
# BENCHFLAGS='-only failover,reconcile'.
BENCHFLAGS ?=
bench: build
	$(GO) run ./bench/cmd/jmbench -out bench-results.json $(BENCHFLAGS)

# The anchors the benchmarks compare jobmaster with, run in the same
# `make bench` when installed (not a test dependency): Debian's etcd.
bench-anchors:
	command -v etcd >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-server etcd-client)
	@etcd --version | head -1

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

# A fault-injection soak: make chaos DURATION=10m SEED=42 (SEED=0 picks one
# and prints it). The report ends the output and is written to REPORT (or
# report.txt in the run's directory, printed with it); the replay kit (seed,
# the fault schedule with times, the workload, the commit) is replay.json
# beside it, and KIT copies it elsewhere too. A failed run keeps every
# node's whole log under .artifacts/chaos/. CHAOS_FLAGS passes more flags,
# e.g. CHAOS_FLAGS='-chaos.cut=route -chaos.executors=4' or
# CHAOS_FLAGS='-chaos.gomaxprocs=1' (starved nodes). docs/chaos.md tells
# how to replay a failure, also under load.
DURATION    ?= 2m
SEED        ?= 0
REPORT      ?=
KIT         ?=
CHAOS_FLAGS ?=
chaos: build
	$(GO) test -count=1 -timeout 0 -run TestChaosSoak ./integration/ -chaos.duration=$(DURATION) -chaos.seed=$(SEED) -chaos.report='$(REPORT)' -chaos.kit='$(KIT)' $(CHAOS_FLAGS) -v

clean:
	rm -rf bin bench-results.json

# PNGs of the web UI's pages (docs/ui-*.png), taken in a headless Chromium
# (Debian's chromium, or JOBMASTER_BROWSER) from a cluster at work.
screenshots: build
	JOBMASTER_SCREENSHOTS=$(CURDIR)/docs JOBMASTER_REQUIRE_BROWSER=1 $(GO) test -count=1 -timeout 10m -run 'TestUIScreenshots$$' ./integration/ -v
