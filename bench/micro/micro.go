// Package micro runs the Go microbenchmarks of fsm/, reconcile/ and
// placement/ with `go test -bench`, echoes their output, and turns each
// result line into a figure.
package micro

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"jobmaster/bench/results"
)

// Suite is one `go test` invocation.
type Suite struct {
	Pkg       string
	Bench     string
	Benchtime string // empty: go test's default (1s)
}

// Args is the suite's go test command line (after "go").
func (s Suite) Args() []string {
	args := []string{"test", "-run", "^$", "-bench", s.Bench, "-benchmem", "-timeout", "10m"}
	if s.Benchtime != "" {
		args = append(args, "-benchtime", s.Benchtime)
	}
	return append(args, s.Pkg)
}

// Command is the suite's command line as a user types it.
func (s Suite) Command() string {
	args := s.Args()
	for i, a := range args {
		if strings.ContainsAny(a, "^$*| ") {
			args[i] = "'" + a + "'"
		}
	}
	return "go " + strings.Join(args, " ")
}

// Suites are the microbenchmarks `make bench` runs. Fixed iteration counts
// keep the slow ones bounded: the apply benchmarks build their state per
// run, and one restore of a million executions takes seconds.
var Suites = []Suite{
	{Pkg: "./fsm/", Bench: "BenchmarkApply", Benchtime: "20000x"},
	{Pkg: "./fsm/", Bench: "BenchmarkSnapshotRestore1M", Benchtime: "2x"},
	{Pkg: "./fsm/", Bench: "BenchmarkEndWideJob", Benchtime: "1x"},
	{Pkg: "./fsm/", Bench: "BenchmarkPlaceWide", Benchtime: "20x"},
	{Pkg: "./fsm/", Bench: "BenchmarkWideRestart", Benchtime: "3x"},
	{Pkg: "./fsm/", Bench: "BenchmarkDeepRestart", Benchtime: "3x"},
	{Pkg: "./fsm/", Bench: "BenchmarkRedeployDense", Benchtime: "3x"},
	{Pkg: "./reconcile/", Bench: "BenchmarkReconcile"},
	{Pkg: "./placement/", Bench: "BenchmarkPlace"},
}

// Run runs every suite from the module root dir, copying the output to
// out, and adds the figures to run. A suite that fails is reported in
// run.Errors; the others still run.
func Run(ctx context.Context, dir string, out io.Writer, run *results.Run) {
	for _, s := range Suites {
		fmt.Fprintf(out, "\n$ %s\n", s.Command())
		if err := runSuite(ctx, dir, s, out, run); err != nil {
			run.Errors = append(run.Errors, fmt.Sprintf("%s: %v", s.Command(), err))
		}
	}
}

func runSuite(ctx context.Context, dir string, s Suite, out io.Writer, run *results.Run) error {
	cmd := exec.CommandContext(ctx, "go", s.Args()...)
	cmd.Dir = dir
	// Cancelling kills go, not the test binary it started, which holds the
	// output pipe: stop waiting for it soon after.
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		done <- err
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(out, line)
		if name, metrics, ok := parseLine(line); ok {
			addFigures(run, s, name, metrics)
		}
	}
	return <-done
}

// parseLine reads "BenchmarkName-2  N  v1 unit1  v2 unit2 ...".
func parseLine(line string) (string, map[string]float64, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", nil, false
	}
	name := f[0]
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	m := make(map[string]float64)
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		m[f[i+1]] = v
	}
	_, ok := m["ns/op"]
	return strings.TrimPrefix(name, "Benchmark"), m, ok
}

// addFigures turns one result line into figures.
func addFigures(run *results.Run, s Suite, name string, m map[string]float64) {
	cmd := s.Command()
	ns := m["ns/op"]
	extra := make(map[string]float64)
	for k, v := range m {
		if k != "ns/op" {
			extra[k] = v
		}
	}
	switch {
	case strings.HasPrefix(name, "Apply/"):
		// Apply/submit/cmds-per-entry=32: ns/op is per command.
		extra["cmds/s"] = 1e9 / ns
		run.Add(results.Figure{Group: "micro fsm apply", Name: strings.TrimPrefix(name, "Apply/"), Value: ns / 1e3, Unit: "µs/cmd", Extra: extra, Command: cmd})
	case name == "SnapshotRestore1M/memory":
		run.Add(results.Figure{Group: "micro fsm memory", Name: "live heap per execution (1M executions)", Value: m["heap-B/exec"], Unit: "B/exec", Command: cmd,
			Note: "heap held by jobs, executions and derived indexes, after GC"})
	case name == "SnapshotRestore1M/persist":
		run.Add(results.Figure{Group: "micro fsm snapshot", Name: "size (1M executions)", Value: m["MB"], Unit: "MB",
			Extra: map[string]float64{"B/exec": m["snap-B/exec"]}, Command: cmd})
		run.Add(results.Figure{Group: "micro fsm snapshot", Name: "persist (1M executions)", Value: ns / 1e9, Unit: "s", Extra: keepMem(m), Command: cmd})
	case name == "SnapshotRestore1M/capture":
		run.Add(results.Figure{Group: "micro fsm snapshot", Name: "capture (1M executions)", Value: ns / 1e9, Unit: "s", Extra: keepMem(m), Command: cmd,
			Note: "copy under the FSM lock"})
	case name == "SnapshotRestore1M/restore":
		run.Add(results.Figure{Group: "micro fsm snapshot", Name: "restore (1M executions)", Value: ns / 1e9, Unit: "s", Extra: keepMem(m), Command: cmd}).
			AtMost(3, "<= 3 s")
	case strings.HasPrefix(name, "EndWideJob/"):
		run.Add(results.Figure{Group: "micro fsm apply", Name: "cancel a running job, " + strings.TrimPrefix(name, "EndWideJob/"), Value: ns / 1e9, Unit: "s/job",
			Extra: map[string]float64{"us/exec": m["us/exec"]}, Command: cmd,
			Note: "cancel-job and every CANCELED report, on one master"})
	case name == "PlaceWide":
		run.Add(results.Figure{Group: "micro fsm apply", Name: "place one region of 10000 subtasks on 100 executors", Value: ns / 1e6, Unit: "ms/cmd",
			Extra: extra, Command: cmd, Note: "decode and apply, on every master"})
	case strings.HasPrefix(name, "Reconcile/"):
		run.Add(results.Figure{Group: "micro reconcile", Name: strings.TrimPrefix(name, "Reconcile/"), Value: ns / 1e3, Unit: "µs/report", Extra: extra, Command: cmd})
	case strings.HasPrefix(name, "Place/"):
		delete(extra, "subtasks/s")
		extra["ms/op"] = ns / 1e6
		run.Add(results.Figure{Group: "micro placement", Name: strings.TrimPrefix(name, "Place/") + " on 1000 executors", Value: m["subtasks/s"], Unit: "subtasks/s", Extra: extra, Command: cmd})
	default:
		run.Add(results.Figure{Group: "micro", Name: name, Value: ns, Unit: "ns/op", Extra: extra, Command: cmd})
	}
}

func keepMem(m map[string]float64) map[string]float64 {
	out := make(map[string]float64)
	for _, k := range []string{"B/op", "allocs/op"} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}
