package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The replay kit: everything needed to run the same faults and workload
// again, written as replay.json into the run's directory (and so into the
// artifact folder of a failed run). The seed fixes the fault schedule
// (kinds, targets by pick, holds, pauses) and the jobs each client
// submits; the kit also records what the nemesis actually did and when,
// the jobs as submitted, the binary's commit and the machine's load, which
// the seed does not fix.

// ReplayKit is replay.json.
type ReplayKit struct {
	Test     string `json:"test"`
	Seed     uint64 `json:"seed"`
	Duration string `json:"duration"` // the fault phase; "0s": each kind once
	Replay   string `json:"replay"`   // the command that runs it again

	Commit     string   `json:"commit"` // git rev-parse HEAD of the tree the binary was built from
	Dirty      bool     `json:"dirty"`  // the tree had uncommitted changes
	DirtyFiles []string `json:"dirty_files,omitempty"`
	Go         string   `json:"go"`

	Machine MachineLoad `json:"machine"`

	Cluster struct {
		Masters   int    `json:"masters"`
		Executors int    `json:"executors"`
		Slots     int    `json:"slots"`
		Heartbeat string `json:"heartbeat"`
		Lease     string `json:"lease"`
		Timeout   string `json:"executor_timeout"`
		Network   string `json:"network"`
		CutMode   string `json:"cut_mode"`
		// NodeGOMAXPROCS is the GOMAXPROCS every node ran with (0: the
		// runtime's default, one per CPU).
		NodeGOMAXPROCS int `json:"node_gomaxprocs"`
		// Placement is the masters' --placement.
		Placement string `json:"placement"`
	} `json:"cluster"`

	Workload struct {
		Clients  int    `json:"clients"`
		InFlight int    `json:"in_flight"`
		Drain    string `json:"drain"`
		Converge string `json:"converge"`
		Slack    string `json:"slack"`
	} `json:"workload"`

	Nemesis struct {
		MaxPause string            `json:"max_pause"`
		Skipped  map[string]string `json:"skipped_kinds,omitempty"`
	} `json:"nemesis"`

	// Faults is what the nemesis did, in order, with wall-clock times.
	Faults []KitFault `json:"faults"`
	// Jobs is what the workload submitted, in order.
	Jobs []KitJob `json:"jobs"`
	// Masters is each master's last reading and case (the input of
	// TestExplainArtifacts, which replays their Raft logs).
	Masters []KitMaster `json:"masters"`

	Result string `json:"result"`
}

// MachineLoad is the machine the run had.
type MachineLoad struct {
	CPUs           int    `json:"cpus"`
	TestGOMAXPROCS int    `json:"test_gomaxprocs"`
	LoadStart      string `json:"loadavg_start"` // /proc/loadavg: 1, 5 and 15 minutes
	LoadEnd        string `json:"loadavg_end"`
	LoadMax1       string `json:"loadavg_max_1min"` // the highest 1-minute load sampled during the run
}

// KitFault is one fault as the nemesis carried it out.
type KitFault struct {
	N       int    `json:"n"`
	Kind    string `json:"kind"`
	Target  string `json:"target,omitempty"`
	Pick    int    `json:"pick"`
	Hold    string `json:"hold"`
	Pause   string `json:"pause"`
	Start   string `json:"start"`
	Healed  string `json:"healed,omitempty"`
	End     string `json:"end"`
	Note    string `json:"note,omitempty"`
	Skipped string `json:"skipped,omitempty"`
}

// KitMaster is one master at the end of the run.
type KitMaster struct {
	Node    string `json:"node"`
	Applied uint64 `json:"applied_index"`
	Hash    string `json:"hash"`
	Case    string `json:"case"`
	Detail  string `json:"detail"`
}

// KitJob is one job of the workload.
type KitJob struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Submitted   string `json:"submitted,omitempty"`
	Acked       bool   `json:"acked"`
	CancelAcked string `json:"cancel_acked,omitempty"`
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// sourceCommit is the commit of the tree the binary is built from, and
// whether it had uncommitted changes (git, from the package directory).
// JOBMASTER_COMMIT overrides it for trees that are not a git checkout.
func sourceCommit() (commit string, dirty bool, files []string) {
	if c := os.Getenv("JOBMASTER_COMMIT"); c != "" {
		return c, false, nil
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown (not a git checkout; set JOBMASTER_COMMIT)", false, nil
	}
	commit = strings.TrimSpace(string(out))
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	if err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(st)), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				files = append(files, l)
			}
		}
	}
	return commit, len(files) > 0, files
}

// loadavg is /proc/loadavg's three averages ("" where unreadable).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// loadWatch keeps the highest 1-minute load average it sampled.
type loadWatch struct{ max float64 }

func (l *loadWatch) sample() {
	if f := strings.Fields(loadavg()); len(f) > 0 {
		if v, err := strconv.ParseFloat(f[0], 64); err == nil && v > l.max {
			l.max = v
		}
	}
}

// newReplayKit fills what is known before the run starts.
func newReplayKit(test string, cfg chaosConfig, nodeProcs int) *ReplayKit {
	k := &ReplayKit{Test: test, Seed: cfg.Seed, Duration: cfg.Duration.String(), Replay: cfg.Replay, Go: runtime.Version()}
	k.Commit, k.Dirty, k.DirtyFiles = sourceCommit()
	k.Machine = MachineLoad{CPUs: runtime.NumCPU(), TestGOMAXPROCS: runtime.GOMAXPROCS(0), LoadStart: loadavg()}
	k.Cluster.Masters, k.Cluster.Executors, k.Cluster.Slots = 3, cfg.Executors, 4
	k.Cluster.Heartbeat, k.Cluster.Lease, k.Cluster.Timeout = (200 * time.Millisecond).String(), chaosLease.String(), chaosTimeout.String()
	k.Cluster.CutMode, k.Cluster.NodeGOMAXPROCS, k.Cluster.Placement = string(cfg.CutMode), nodeProcs, cfg.Placement.String()
	k.Workload.Clients, k.Workload.InFlight = cfg.Clients, cfg.InFlight
	k.Workload.Drain, k.Workload.Converge, k.Workload.Slack = cfg.Drain.String(), cfg.Converge.String(), cfg.Slack.String()
	k.Nemesis.MaxPause = cfg.MaxPause.String()
	return k
}

// finish records what the run did.
func (k *ReplayKit) finish(o *chaosOutcome, load *loadWatch) {
	k.Cluster.Network = o.network
	k.Machine.LoadEnd = loadavg()
	k.Machine.LoadMax1 = strconv.FormatFloat(load.max, 'f', 2, 64)
	if len(o.skipped) > 0 {
		k.Nemesis.Skipped = map[string]string{}
		for kind, why := range o.skipped {
			k.Nemesis.Skipped[string(kind)] = why
		}
	}
	k.Faults = nil
	for i, ev := range o.events {
		k.Faults = append(k.Faults, KitFault{N: i + 1, Kind: string(ev.Kind), Target: ev.Target, Pick: ev.Pick,
			Hold: ev.Hold.String(), Pause: ev.Pause.String(), Start: stamp(ev.Start), Healed: stamp(ev.Healed), End: stamp(ev.End),
			Note: ev.Note, Skipped: ev.Skipped})
	}
	k.Jobs = nil
	for _, j := range o.jobs {
		kj := KitJob{ID: j.ID, Kind: j.Kind, Acked: j.Acked}
		if j.Submitted != 0 {
			kj.Submitted = stamp(time.Unix(0, j.Submitted))
		}
		if j.CancelAcked != 0 {
			kj.CancelAcked = stamp(time.UnixMilli(j.CancelAcked))
		}
		k.Jobs = append(k.Jobs, kj)
	}
	k.Masters = nil
	for _, v := range o.result.Replicas {
		k.Masters = append(k.Masters, KitMaster{Node: v.Node, Applied: v.Final.Applied, Hash: v.Final.Hash, Case: string(v.Case), Detail: v.Detail})
	}
	switch vs := o.result.Violations(); {
	case len(vs) == 0 && len(o.problems) == 0:
		k.Result = "every property held"
	default:
		k.Result = strconv.Itoa(len(vs)) + " violations, " + strconv.Itoa(len(o.problems)) + " problems"
	}
}

// write writes the kit as JSON.
func (k *ReplayKit) write(path string) error {
	b, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
