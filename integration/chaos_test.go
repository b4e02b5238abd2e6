package integration

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/placement"
)

var (
	chaosDuration = flag.Duration("chaos.duration", 0, "TestChaosSoak: how long to inject faults (0 skips the soak)")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "TestChaosSoak: the nemesis and workload seed (0: pick one from the clock and print it)")
	chaosSeeds    = flag.String("chaos.seeds", "7", "TestChaos: comma-separated fixed seeds, each runs every fault kind once")
	chaosDir      = flag.String("chaos.dir", "", "keep each run's logs, data, history and report under this directory")
	chaosReport   = flag.String("chaos.report", "", "TestChaosSoak: also write the report to this file")
	chaosKit      = flag.String("chaos.kit", "", "TestChaosSoak: also write the replay kit (replay.json) to this file")
	chaosCut      = flag.String("chaos.cut", string(CutRule), "how partitions drop traffic: rule (silent, in a router namespace) or route (blackhole routes in the nodes' namespaces)")
	chaosNetns    = flag.Bool("chaos.netns", true, "run nodes in network namespaces when root and iproute2 allow (partition faults need it)")
	chaosExecs    = flag.Int("chaos.executors", 3, "number of executors")
	chaosSlack    = flag.Duration("chaos.slack", 100*time.Millisecond, "overlap forgiven between two runs of a subtask (recording skew)")
	chaosConverge = flag.Duration("chaos.converge", 30*time.Second, "how long to wait, after the jobs ended, for every master to reach the leader's applied index")
	chaosProcs    = flag.Int("chaos.gomaxprocs", 0, "GOMAXPROCS of every node (0: one per CPU); 1 starves them as a loaded machine does")
	chaosPlace    = flag.String("chaos.placement", "spread", "the masters' --placement: spread or pack")
)

// runDir is where a run keeps its files: under -chaos.dir if given.
func runDir(t *testing.T, name string, keep bool) string {
	if *chaosDir != "" {
		require.NoError(t, os.MkdirAll(*chaosDir, 0o755))
		d, err := os.MkdirTemp(*chaosDir, name+"-")
		require.NoError(t, err)
		return d
	}
	if keep {
		d, err := os.MkdirTemp("", "jobmaster-"+name+"-")
		require.NoError(t, err)
		return d
	}
	return ""
}

func finish(t *testing.T, o *chaosOutcome) {
	t.Logf("\n%s", o.report)
	if o.Failed() {
		var lines []string
		for _, v := range o.result.Violations() {
			lines = append(lines, fmt.Sprintf("[%s] %s", v.Property, v.Detail))
		}
		lines = append(lines, o.problems...)
		if len(lines) > 20 {
			lines = append(lines[:20], fmt.Sprintf("... %d more in the report", len(lines)-20))
		}
		t.Errorf("seed %d: the chaos run found %d violations and %d problems (replay: %s; replay kit: %s; artifacts: %s):\n%s",
			o.cfg.Seed, len(o.result.Violations()), len(o.problems), o.cfg.Replay, o.kitPath, o.artifacts, strings.Join(lines, "\n"))
	}
}

// replayFlags are the flags of this run that change what it does, as
// they must be given again to replay it.
func replayFlags() string {
	var out []string
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "chaos.cut", "chaos.netns", "chaos.executors", "chaos.slack", "chaos.converge", "chaos.gomaxprocs", "chaos.placement":
			out = append(out, fmt.Sprintf("-%s=%s", f.Name, f.Value))
		case "test.cpu":
			out = append(out, "-cpu="+f.Value.String())
		}
	})
	if len(out) == 0 {
		return ""
	}
	return " " + strings.Join(out, " ")
}

// chaosPolicy is -chaos.placement, checked.
func chaosPolicy(t *testing.T) placement.Policy {
	p, err := placement.ParsePolicy(*chaosPlace)
	if err != nil {
		t.Fatalf("-chaos.placement: %v", err)
	}
	return p
}

// soakReplay is the make command that replays a soak.
func soakReplay(seed uint64) string {
	cmd := fmt.Sprintf("make chaos DURATION=%s SEED=%d", *chaosDuration, seed)
	if f := strings.TrimSpace(replayFlags()); f != "" {
		cmd += fmt.Sprintf(" CHAOS_FLAGS='%s'", f)
	}
	return cmd
}

// TestChaos is the chaos suite's share of `go test ./...`: for each fixed
// seed, every fault kind once (in the seed's order), under a concurrent
// workload, then the history check.
func TestChaos(t *testing.T) {
	skipShort(t)
	for _, s := range strings.Split(*chaosSeeds, ",") {
		seed, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		require.NoError(t, err, "-chaos.seeds")
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			dir := runDir(t, fmt.Sprintf("chaos-seed%d", seed), false)
			o := runChaos(t, chaosConfig{
				Seed: seed, Executors: *chaosExecs, MaxPause: 1500 * time.Millisecond,
				Netns: *chaosNetns, CutMode: CutMode(*chaosCut), Dir: dir, Drain: 2 * time.Minute, Slack: *chaosSlack,
				Converge: *chaosConverge, NodeGOMAXPROCS: *chaosProcs, Test: fmt.Sprintf("TestChaos-seed%d", seed),
				Replay: fmt.Sprintf("go test -count=1 -run 'TestChaos$/seed=%d$' ./integration/ -v -chaos.seeds=%d%s", seed, seed, replayFlags()),
			})
			finish(t, o)
		})
	}
}

// TestChaosSoak is `make chaos DURATION=... SEED=...`: faults drawn from
// the seed for the whole duration (every kind first, then at random), then
// the history check and a report, also written to a file.
func TestChaosSoak(t *testing.T) {
	if *chaosDuration <= 0 {
		t.Skip("a soak: run it with -chaos.duration (make chaos DURATION=10m SEED=42)")
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()%1_000_000) + 1
		t.Logf("no -chaos.seed given: using seed %d", seed)
	}
	dir := runDir(t, fmt.Sprintf("chaos-soak-seed%d", seed), true)
	t.Logf("run directory: %s", dir)
	o := runChaos(t, chaosConfig{
		Seed: seed, Duration: *chaosDuration, Executors: *chaosExecs, MaxPause: 3 * time.Second,
		Netns: *chaosNetns, CutMode: CutMode(*chaosCut), Dir: dir, ReportPath: *chaosReport, Drain: 5 * time.Minute, Slack: *chaosSlack,
		Converge: *chaosConverge, NodeGOMAXPROCS: *chaosProcs, Placement: chaosPolicy(t), Test: fmt.Sprintf("TestChaosSoak-seed%d", seed),
		Replay: soakReplay(seed),
	})
	if *chaosKit != "" {
		if err := o.kit.write(*chaosKit); err != nil {
			t.Errorf("replay kit: %v", err)
		}
	}
	// The report also goes to standard output, outside the test log, so
	// `make chaos` shows it whole at the end.
	fmt.Println(o.report)
	finish(t, o)
}
