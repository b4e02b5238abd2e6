// Command jmbench is jobmaster's benchmark suite (`make bench`): the Go
// microbenchmarks of fsm/, reconcile/ and placement/, then macro benchmarks
// against real three-master clusters of bin/jobmaster processes on
// loopback. It prints a table of every figure with its target and the
// command that reproduces it, and writes them as JSON.
//
//	go run ./bench/cmd/jmbench -out bench-results.json
//	go run ./bench/cmd/jmbench -only failover,reconcile
//	go run ./bench/cmd/jmbench -only failover,submission -tls both
//
// -tls on runs the benchmarks that take it (failover, submission) against
// secure clusters (TLS everywhere, gossip encryption, ACLs with a token on
// every request, as `jobmaster dev` runs); -tls both runs them plain and
// then secure, so that one table shows the cost of security: the secure
// figures are in groups "<group> tls+acl".
//
// See docs/BENCHMARKS.md for what each figure measures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"jobmaster/bench/fleet"
	"jobmaster/bench/macro"
	"jobmaster/bench/micro"
	"jobmaster/bench/results"
	"jobmaster/placement"
)

// benchmarks are the macro benchmarks, in the order they run.
var benchmarks = []struct {
	name string
	run  func(context.Context, *macro.Env) error
	// securable: the benchmark runs its cluster with TLS when -tls asks.
	securable bool
}{
	{"submission", macro.Submission, true},
	{"placement", macro.Placement, false},
	{"e2e", macro.EndToEnd, false},
	{"failover", macro.Failover, true},
	{"reconcile", macro.Reconciliation, false},
	{"exchange", macro.Exchange, false},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == fleet.HostArg {
		os.Exit(fleet.RunHost(os.Args[2:]))
	}
	out := flag.String("out", "", "write the figures as JSON to this file")
	only := flag.String("only", "", "comma-separated benchmarks to run: micro, "+names()+" (default: all)")
	bin := flag.String("bin", "bin/jobmaster", "the jobmaster binary (built with `go build` if missing)")
	dir := flag.String("dir", "", "directory for the clusters' data and logs (default: a temporary one, removed unless -keep)")
	keep := flag.Bool("keep", false, "keep the clusters' data and logs")
	quick := flag.Bool("quick", false, "fewer trials and shorter windows (development only)")
	strict := flag.Bool("strict", false, "exit 1 when a benchmark could not produce its figures")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (the load generator; sim fleets run in a child process) here")
	fleets := flag.String("executors", "100,1000", "placement: sizes of the sim executor fleets (10,000 slots in each)")
	levels := flag.String("clients", "1,3,16,64,256", "submission: the concurrency levels, each against a fresh cluster and then etcd")
	policy := flag.String("placement", "spread", "the masters' --placement: spread (their default) or pack")
	tlsMode := flag.String("tls", "off", "failover and submission: off (plain clusters), on (secure clusters: TLS, gossip encryption, ACLs with a token on every request) or both (plain, then secure)")
	flag.Parse()
	var modes []bool
	switch *tlsMode {
	case "off":
		modes = []bool{false}
	case "on":
		modes = []bool{true}
	case "both":
		modes = []bool{false, true}
	default:
		fmt.Fprintf(os.Stderr, "jmbench: -tls %q: use off, on or both\n", *tlsMode)
		os.Exit(2)
	}
	sizes, clients := positives("-executors", *fleets), positives("-clients", *levels)

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "jmbench: -cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	// The first SIGINT or SIGTERM stops the run (the clusters are killed on
	// the way out); a second one kills the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	pol, err := placement.ParsePolicy(*policy)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jmbench: -placement:", err)
		os.Exit(2)
	}
	err = run(ctx, *out, *only, *bin, *dir, *keep, *quick, sizes, clients, modes, pol)
	var failed *benchErrors
	switch {
	case errors.As(err, &failed) && !*strict:
		// Reported in the table and the JSON, like a missed target.
	case err != nil:
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "jmbench:", err)
		os.Exit(1)
	}
}

// positives parses a comma-separated list of positive integers, or exits
// naming the flag.
func positives(flagName, list string) []int {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "jmbench: %s: bad number %q\n", flagName, s)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

func names() string {
	var n []string
	for _, b := range benchmarks {
		n = append(n, b.name)
	}
	return strings.Join(n, ", ")
}

func run(ctx context.Context, out, only, bin, dir string, keep, quick bool, fleets, clients []int, tlsModes []bool, policy placement.Policy) error {
	selected := map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			selected[s] = true
		}
	}
	want := func(name string) bool { return len(selected) == 0 || selected[name] }
	for s := range selected {
		if s != "micro" && !strings.Contains(", "+names()+",", ", "+s+",") {
			return fmt.Errorf("-only: unknown benchmark %q (have micro, %s)", s, names())
		}
	}

	started := time.Now()
	res := &results.Run{Started: started, Machine: results.Describe()}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
	}
	logf("machine: %d CPUs (%s), %s GiB, kernel %s, %s; load average at start: %s",
		res.Machine.CPUs, res.Machine.CPUModel, res.Machine.MemoryGiB, res.Machine.Kernel, res.Machine.Go, res.Machine.LoadAvg)

	if want("micro") {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		micro.Run(ctx, wd, os.Stdout, res)
		logf("microbenchmarks done")
	}

	type runOf struct {
		name   string
		run    func(context.Context, *macro.Env) error
		secure bool
	}
	var macros []runOf
	for _, b := range benchmarks {
		if !want(b.name) {
			continue
		}
		if !b.securable {
			macros = append(macros, runOf{b.name, b.run, false})
			continue
		}
		for _, secure := range tlsModes {
			macros = append(macros, runOf{b.name, b.run, secure})
		}
	}
	if len(macros) > 0 {
		if err := ensureBinary(bin); err != nil {
			return err
		}
		abs, err := filepath.Abs(bin)
		if err != nil {
			return err
		}
		if dir == "" {
			if dir, err = os.MkdirTemp("", "jmbench-"); err != nil {
				return err
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		env := &macro.Env{Bin: abs, Exe: exe, Dir: dir, Run: res, Quick: quick, Fleets: fleets, Clients: clients, Log: logf, Placement: policy}
		if policy != placement.Spread {
			logf("masters run with --placement %s", policy)
		}
		for _, m := range macros {
			if ctx.Err() != nil {
				break
			}
			env.TLS = m.secure
			name := m.name
			if m.secure {
				name += " (tls+acl)"
			}
			t0 := time.Now()
			logf("== %s", name)
			if err := m.run(ctx, env); err != nil {
				logf("%s failed: %v", name, err)
				res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", name, err))
			}
			logf("== %s took %s", name, time.Since(t0).Round(100*time.Millisecond))
		}
	}

	res.Duration = time.Since(started).Round(time.Second).String()
	fmt.Println()
	res.Print(os.Stdout)
	fmt.Printf("\nTotal: %s\n", res.Duration)
	if out != "" {
		if err := res.WriteJSON(out); err != nil {
			return err
		}
		fmt.Printf("Wrote %s\n", out)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(res.Errors) > 0 {
		return &benchErrors{res.Errors}
	}
	return nil
}

// benchErrors are the benchmarks that could not produce their figures.
type benchErrors struct{ list []string }

func (e *benchErrors) Error() string {
	return fmt.Sprintf("%d benchmark(s) could not produce their figures: %s", len(e.list), strings.Join(e.list, "; "))
}

// ensureBinary builds bin from ./cmd/jobmaster if it does not exist.
func ensureBinary(bin string) error {
	if _, err := os.Stat(bin); err == nil {
		return nil
	}
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/jobmaster")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s: %w", bin, err)
	}
	return nil
}
