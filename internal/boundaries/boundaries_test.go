// Package boundaries holds the import rules between jobmaster's packages as
// tests, each with its reason.
package boundaries

import (
	"go/build"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

const module = "jobmaster"

// rules: a package must not import (directly or through other packages of
// this module) any of the listed packages.
var rules = []struct {
	pkg    string
	forbid []string
	why    string
}{
	{"fsm", []string{"jobmaster/master", "jobmaster/executor", "jobmaster/membership", "jobmaster/leader", "net/http"},
		"the replicated state is deterministic: every master applies the same commands to the same state, so it must not reach for the network, a node's role or leader-only memory"},
	{"leader", []string{"jobmaster/master", "jobmaster/executor", "jobmaster/membership", "net/http", "net"},
		"the leader's decisions are pure: they take the state, reports and the time and return a Ready; the I/O is package master's"},
	{"reconcile", []string{"jobmaster/master", "jobmaster/leader", "jobmaster/membership", "net/http"},
		"reconciliation is a pure function of the expected set, a report and the time"},
	{"placement", []string{"jobmaster/master", "jobmaster/leader", "jobmaster/membership", "net/http"},
		"placement is a pure function of the ready regions and the executors' free slots"},
	{"executor", []string{"jobmaster/fsm", "jobmaster/master", "jobmaster/leader", "jobmaster/reconcile", "jobmaster/placement"},
		"an executor knows only the wire protocol: it must not depend on the masters' state or decisions, so the two roles evolve behind one versioned protocol"},
	{"wire", []string{"jobmaster/fsm", "jobmaster/master", "jobmaster/executor", "jobmaster/leader", "net/http"},
		"the protocol is types both roles share; it depends on neither"},
	{"api", []string{"jobmaster/fsm", "jobmaster/master", "jobmaster/executor", "jobmaster/leader", "net/http"},
		"the public API's bodies are types the client shares; the client must not pull in a master"},
	{"client", []string{"jobmaster/fsm", "jobmaster/master", "jobmaster/executor", "jobmaster/leader"},
		"the Go client talks HTTP to masters; it must not link their code"},
	{"pki", []string{"jobmaster/transport", "jobmaster/master", "jobmaster/executor", "jobmaster/membership", "net/http"},
		"the PKI issues and reads certificates; how connections use them is package transport's, so the CA tool and the identity rule stay free of any role"},
	{"acl", []string{"jobmaster/fsm", "jobmaster/master", "jobmaster/executor", "jobmaster/transport", "net/http"},
		"what a policy allows is a pure decision on a policy and a route; looking tokens up and answering requests is the master's"},
	{"strictjson", []string{"jobmaster/jobspec", "jobmaster/api", "jobmaster/fsm", "jobmaster/master", "net/http"},
		"strict decoding is bytes in, a value or a field-naming error out, for any document; what a job spec or a request means is its own package's"},
	{"exposure", []string{"jobmaster/master", "jobmaster/executor", "jobmaster/membership", "jobmaster/transport", "net/http"},
		"whether a node may start exposed is a pure decision on its addresses and settings; loading certificates and keys is the node's"},
}

func TestImportBoundaries(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	for _, r := range rules {
		deps := map[string]bool{}
		walk(t, root, module+"/"+r.pkg, deps)
		var bad []string
		for _, f := range r.forbid {
			if deps[f] {
				bad = append(bad, f)
			}
		}
		sort.Strings(bad)
		if len(bad) > 0 {
			t.Errorf("%s imports %s: %s", r.pkg, strings.Join(bad, ", "), r.why)
		}
	}
}

// walk adds the imports of pkg (not its tests), and those of the module's
// packages among them, to deps.
func walk(t *testing.T, root, pkg string, deps map[string]bool) {
	dir := filepath.Join(root, strings.TrimPrefix(pkg, module))
	p, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatalf("%s: %v", pkg, err)
	}
	for _, imp := range p.Imports {
		if deps[imp] {
			continue
		}
		deps[imp] = true
		if strings.HasPrefix(imp, module+"/") {
			walk(t, root, imp, deps)
		}
	}
}

// TestRulesCanFail: the walk finds a known import, so a rule that forbids
// it would fail.
func TestRulesCanFail(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	deps := map[string]bool{}
	walk(t, root, module+"/master", deps)
	for _, want := range []string{"jobmaster/fsm", "jobmaster/leader", "net/http", "github.com/hashicorp/raft"} {
		if !deps[want] {
			t.Errorf("master's imports lack %s: the walk misses imports", want)
		}
	}
}
