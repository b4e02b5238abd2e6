package integration

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report renders a chaos run for a reader who has not seen the code:
// what was injected, what the workload did, which properties held, and
// how to replay a failure.
func (o *chaosOutcome) Report() string {
	var b strings.Builder
	cfg := o.cfg
	fmt.Fprintf(&b, "JOBMASTER CHAOS REPORT\n")
	fmt.Fprintf(&b, "seed %d   fault phase %s (planned %s)   whole run %s\n", cfg.Seed,
		o.faultTime.Round(time.Second), planned(cfg.Duration), o.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "cluster: 3 masters, %d executors (4 slots each), executor lease %s, executor timeout %s, heartbeat 200ms\n",
		cfg.Executors, chaosLease, chaosTimeout)
	fmt.Fprintf(&b, "network: %s\n", o.network)
	fmt.Fprintf(&b, "run directory (logs, data, history.log): %s\n", o.dir)
	if k := o.kit; k != nil {
		dirty := ""
		if k.Dirty {
			dirty = fmt.Sprintf(" (DIRTY: %d files changed)", len(k.DirtyFiles))
		}
		procs := "default"
		if k.Cluster.NodeGOMAXPROCS > 0 {
			procs = fmt.Sprint(k.Cluster.NodeGOMAXPROCS)
		}
		fmt.Fprintf(&b, "commit %s%s, %s; %d CPUs, test GOMAXPROCS %d, node GOMAXPROCS %s; load average at start %s, at end %s, highest 1-min %s\n",
			k.Commit, dirty, k.Go, k.Machine.CPUs, k.Machine.TestGOMAXPROCS, procs, k.Machine.LoadStart, k.Machine.LoadEnd, k.Machine.LoadMax1)
		fmt.Fprintf(&b, "replay kit (seed, fault schedule with times, workload, commit): %s\n", o.kitPath)
	}
	if o.Failed() {
		fmt.Fprintf(&b, "artifacts (every node's whole log, data, history, report, kit), kept because the run failed: %s\n", o.artifacts)
	}
	fmt.Fprintf(&b, "replay: %s\n", cfg.Replay)
	fmt.Fprintf(&b, "        (the same seed gives the same fault schedule, targets and durations, and the same jobs;\n")
	fmt.Fprintf(&b, "         the machine's timing differs, so what the faults hit may differ)\n\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "FAULT KIND\tINJECTED\tSKIPPED\tHOW\n")
	injected, skipped := map[FaultKind]int{}, map[FaultKind]int{}
	for _, ev := range o.events {
		if ev.Skipped != "" {
			skipped[ev.Kind]++
		} else {
			injected[ev.Kind]++
		}
	}
	total := 0
	for _, k := range AllFaults {
		how := faultHow[k]
		if why := o.skipped[k]; why != "" {
			how = "NOT RUN: " + why
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", k, injected[k], skipped[k], how)
		total += injected[k]
	}
	fmt.Fprintf(tw, "total\t%d\t\t\n", total)
	tw.Flush()
	for _, ev := range o.events {
		if ev.Skipped != "" {
			fmt.Fprintf(&b, "  skipped %s at %s: %s\n", ev.Kind, ev.Start.Format("15:04:05"), ev.Skipped)
		}
	}

	byStatus := map[string]int{}
	byKind := map[string]map[string]int{}
	acked, cancelled := 0, 0
	for _, j := range o.jobs {
		if j.Acked {
			acked++
		}
		if j.CancelAcked != 0 {
			cancelled++
		}
		st := "UNREAD"
		if f := o.final[j.ID]; f != nil {
			st = f.Status
		}
		byStatus[st]++
		k := strings.SplitN(j.Kind, "/", 2)[0]
		if byKind[k] == nil {
			byKind[k] = map[string]int{}
		}
		byKind[k][st]++
	}
	fmt.Fprintf(&b, "\nJOBS\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "submitted\tacknowledged\tcancel requested\tFINISHED\tFAILED\tCANCELED\tnot terminal\n")
	notTerm := len(o.jobs) - byStatus["FINISHED"] - byStatus["FAILED"] - byStatus["CANCELED"]
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\n", len(o.jobs), acked, cancelled,
		byStatus["FINISHED"], byStatus["FAILED"], byStatus["CANCELED"], notTerm)
	tw.Flush()
	var kinds []string
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		var parts []string
		for _, st := range sortedKeys(byKind[k]) {
			parts = append(parts, fmt.Sprintf("%s %d", st, byKind[k][st]))
		}
		fmt.Fprintf(&b, "  %-14s %s\n", k, strings.Join(parts, ", "))
	}
	if len(o.retries) > 0 {
		fmt.Fprintf(&b, "  client errors seen, each retried with the same id: %s\n", strings.Join(o.retries, ", "))
	}

	fmt.Fprintf(&b, "\nMECHANISMS EXERCISED (from the nodes' logs)\n")
	for _, e := range o.exercised {
		fmt.Fprintf(&b, "  %s\n", e)
	}

	fmt.Fprintf(&b, "\nPROPERTIES\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "PROPERTY\tCHECKED\tVERDICT\tMEANING\n")
	for _, p := range o.result.Properties {
		verdict := "held"
		if !p.Held() {
			verdict = fmt.Sprintf("VIOLATED (%d)", len(p.Violations))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", p.Name, p.Checked, verdict, p.Description)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nMASTERS AT THE END (hashes compared only at equal applied indexes; %d readings during the run and the wait)\n", o.hashReadings)
	conv := o.convergence
	reached := "reached by every master"
	if !conv.Reached {
		reached = "NOT reached by every master"
	}
	fmt.Fprintf(&b, "  target: applied index %d (leader %s), %s after %s (bound %s)\n", conv.Target, orNone(conv.Leader),
		reached, conv.Waited.Round(time.Millisecond), cfg.Converge)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  MASTER\tAPPLIED\tHASH\tJOBS\tCASE\tWHY\n")
	listed := map[string]MasterSnapshot{}
	for _, m := range o.masters {
		listed[m.ID] = m
	}
	for _, v := range o.result.Replicas {
		jobs := "unread"
		if m, ok := listed[v.Node]; ok && m.Err == "" {
			jobs = fmt.Sprint(len(m.Jobs))
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\n", v.Node, v.Final.Applied, short(v.Final.Hash), jobs, v.Case, v.Detail)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nlargest overlap of two runs of a subtask: %s (slack %s)\n", o.result.MaxOverlap, cfg.Slack)
	fmt.Fprintf(&b, "largest post-thaw fencing tail (stale run going on after its executor thawed, allowed %s): %s\n",
		fenceAllowance, o.result.MaxThawTail)
	fmt.Fprintf(&b, "longest a task process ran while the leader did not expect it (sampled every 500ms, frozen time excluded): %s\n", o.stray)
	for _, n := range o.result.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}

	vs := o.result.Violations()
	if len(vs) == 0 && len(o.problems) == 0 {
		fmt.Fprintf(&b, "\nRESULT: every property held.\n")
	} else {
		fmt.Fprintf(&b, "\nRESULT: %d violations, %d problems. Replay with: %s\n", len(vs), len(o.problems), cfg.Replay)
	}
	for i, v := range vs {
		if i == 50 {
			fmt.Fprintf(&b, "  ... and %d more\n", len(vs)-50)
			break
		}
		fmt.Fprintf(&b, "  VIOLATION [%s] %s\n", v.Property, v.Detail)
	}
	for _, p := range o.problems {
		fmt.Fprintf(&b, "  PROBLEM %s\n", p)
	}
	fmt.Fprintf(&b, "\nFAULT TIMELINE (start-end of each fault, its pause included; to match violations with faults)\n")
	for i, ev := range o.events {
		what := ev.Note
		if ev.Skipped != "" {
			what = "skipped: " + ev.Skipped
		}
		fmt.Fprintf(&b, "  #%-3d %s-%s %-19s %-3s %s\n", i+1, ev.Start.Format("15:04:05.000"), ev.End.Format("15:04:05.000"), ev.Kind, ev.Target, what)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func planned(d time.Duration) string {
	if d == 0 {
		return "each fault kind once"
	}
	return d.String()
}

// faultHow says how each kind is injected, for the report.
var faultHow = map[FaultKind]string{
	KillLeader:        "SIGKILL the leader, restart it on its data dir",
	KillMaster:        "SIGKILL a random master, restart it on its data dir",
	PauseLeader:       "SIGSTOP the leader, SIGCONT later (a stale leader)",
	KillExecutor:      "SIGKILL an executor, restart it on its data dir",
	WipeExecutor:      "SIGKILL an executor, wipe its data dir, restart it",
	FreezeExecutor:    "SIGSTOP an executor and its tasks until it is declared lost, then SIGCONT",
	PartitionMaster:   "cut a random master off from every other node",
	PartitionExecutor: "cut an executor off from every master",
	PartitionLeader:   "cut the leader off from the other masters (executors still reach it)",
}
