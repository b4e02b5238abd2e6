// Package reconcile compares what an executor reports with what the leader
// expects on it (deployment reconciliation, as in Flink's
// DefaultExecutionDeploymentReconciler) and decides what to do. It is pure:
// the expected set, the report and the time go in; a Result comes out, and
// the leader carries it out.
//
// Rules, per report:
//   - unknown: an execution the executor holds live but the leader does not
//     expect there (never placed, ended, or placed elsewhere) is cancelled on
//     the executor; the cancel repeats with every report that still shows it.
//   - a reported state further along than the recorded one is recorded, and
//     reporting a pending execution acknowledges its deployment.
//   - missing: a deployed execution absent from a full report is failed; the
//     job's restart strategy decides what follows. An execution whose
//     acknowledgment was committed after the heartbeat was sent is not
//     missing: the report may predate it.
//   - a pending execution is never missing: it is deployed again while its
//     deadline runs (unless it is being cancelled), and failed when the
//     deadline passes; the deadline is judged at the time the report was
//     asked for, since the report shows the executor as it was then.
//   - a deployed execution being cancelled that the executor no longer holds
//     is cancelled for good; one it still runs gets the cancel again.
//   - a terminal state of an execution the leader does not expect needs no
//     recording: it is acknowledged so the executor can forget it.
package reconcile

import (
	"fmt"
	"time"
	"unicode/utf8"

	"jobmaster/fsm"
	"jobmaster/wire"
)

// Input is one report and what the leader expects.
type Input struct {
	Executor string
	// Expected is the live executions placed on the executor, from the FSM
	// as it is when the report is handled.
	Expected []fsm.Execution
	// Reported is what the executor said it holds.
	Reported []wire.ExecutionStatus
	// Partial is set for a push, which lists only what changed: nothing can
	// be missing from it.
	Partial bool
	// BaseIndex is the FSM's applied index when the heartbeat was sent.
	BaseIndex uint64
	// Now is the leader's clock (unix ms) when the report was asked for (the
	// heartbeat's send time), and AckDeadline how long a deployment may stay
	// unacknowledged.
	Now         int64
	AckDeadline time.Duration
	// StoppedEarly holds the executions the executor stopped before this
	// leader renewed its lease: one of them stopped because its lease ran
	// out (wire.LeaseExpiry) was stopped for want of a leader, not by its
	// fault or the executor's; its end is recorded Fenced, and its restart
	// is not counted.
	StoppedEarly map[string]bool
}

// Result is what to do about a report.
type Result struct {
	// Record is the states to commit (report-executions).
	Record []fsm.ReportUpdate
	// Missing is the executions to fail (fail-executions) because the
	// executor lost them, and Expired those whose deployment was never
	// acknowledged in time.
	Missing []string
	Expired []string
	// Cancel is the executions to cancel on the executor; Unknown is those
	// of them that the leader does not expect there (the others are being
	// cancelled already).
	Cancel  []string
	Unknown []string
	// Redeploy is the pending executions to deploy again.
	Redeploy []string
	// Ack is the terminal executions the executor may forget now.
	Ack []string
}

// Empty reports whether the result asks for nothing.
func (r *Result) Empty() bool {
	return len(r.Record)+len(r.Missing)+len(r.Expired)+len(r.Cancel)+len(r.Redeploy)+len(r.Ack) == 0
}

// Reconcile decides what to do about one report.
func Reconcile(in Input) Result {
	var out Result
	expected := make(map[string]*fsm.Execution, len(in.Expected))
	for i := range in.Expected {
		expected[in.Expected[i].ID] = &in.Expected[i]
	}
	reported := make(map[string]bool, len(in.Reported))
	for i := range in.Reported {
		r := &in.Reported[i]
		if reported[r.ExecutionID] {
			continue // listed twice: the first counts
		}
		reported[r.ExecutionID] = true
		st := wire.State(r.State)
		e, ok := expected[r.ExecutionID]
		switch {
		case !ok && r.State.Terminal():
			out.Ack = append(out.Ack, r.ExecutionID)
		case !ok:
			out.Cancel = append(out.Cancel, r.ExecutionID)
			out.Unknown = append(out.Unknown, r.ExecutionID)
		case st.Terminal():
			out.Record = append(out.Record, fsm.ReportUpdate{ID: e.ID, State: st, Message: cut(r.Message, wire.MaxStatusMessage), Bytes: r.Bytes, Unavailable: r.Unavailable,
				Fenced: in.StoppedEarly[e.ID] && st == wire.StateCanceled && wire.LeaseExpiry(r.Message)})
		case !e.Deployed || (st == wire.StateRunning && e.State == wire.StateDeploying):
			out.Record = append(out.Record, fsm.ReportUpdate{ID: e.ID, State: st})
			if e.State == wire.StateCanceling {
				out.Cancel = append(out.Cancel, e.ID)
			}
		case e.State == wire.StateCanceling:
			out.Cancel = append(out.Cancel, e.ID)
		}
	}
	if in.Partial {
		return out
	}
	deadline := in.AckDeadline.Milliseconds()
	for i := range in.Expected {
		e := &in.Expected[i]
		if reported[e.ID] {
			continue
		}
		switch {
		case e.Deployed && e.AckIndex > in.BaseIndex:
			// Acknowledged after the heartbeat was sent: the report may
			// predate the deployment.
		case e.Deployed:
			// Missing (a cancelling one is thereby cancelled for good).
			out.Missing = append(out.Missing, e.ID)
		case in.Now-e.DeployTime > deadline:
			out.Expired = append(out.Expired, e.ID)
		case e.State == wire.StateCanceling:
			// Pending and being cancelled: its deployment may still be in
			// flight. It ends when its executor reports it (and gets the
			// cancel) or when the deployment expires, not before: a restart
			// must not start beside it.
		case e.DeployIndex <= in.BaseIndex:
			out.Redeploy = append(out.Redeploy, e.ID)
		}
	}
	return out
}

// Commands turns a result into the commands to propose, stamped with the
// leader's token and clock.
func Commands(executor string, r Result, token uint64, now int64, ackDeadline time.Duration) []fsm.Command {
	var cmds []fsm.Command
	f := fsm.Fenced{Token: token, Time: now}
	if len(r.Record) > 0 {
		cmds = append(cmds, &fsm.ReportExecutions{Fenced: f, Executor: executor, Updates: r.Record})
	}
	if len(r.Missing) > 0 {
		cmds = append(cmds, &fsm.FailExecutions{Fenced: f, Executor: executor, IDs: r.Missing,
			Reason: fmt.Sprintf("missing on executor %s", executor)})
	}
	if len(r.Expired) > 0 {
		cmds = append(cmds, &fsm.FailExecutions{Fenced: f, Executor: executor, IDs: r.Expired,
			Reason: fmt.Sprintf("deployment to executor %s not acknowledged within %s", executor, ackDeadline)})
	}
	return cmds
}

// PartitionInput is an executor's report of the partitions it holds, and
// what the leader tracks there.
type PartitionInput struct {
	// Tracked is the partitions the state tracks on the executor.
	Tracked []fsm.Partition
	// Reported is what the executor said it holds.
	Reported []wire.Partition
	// Partial is set for a push, which need not list every partition.
	Partial bool
	// BaseIndex is the state's applied index when the report was asked for.
	BaseIndex uint64
	// ProducerLive reports whether an execution has not ended in the state:
	// a partition of it is in flight (its FINISHED is not recorded yet).
	ProducerLive func(id string) bool
}

// PartitionResult is what to do about the partitions of one report.
type PartitionResult struct {
	// Release is the partitions the executor holds that nobody needs: the
	// state does not track them (released, superseded, or of a forgotten
	// job). The executor deletes them; the request repeats with every report
	// that still shows them.
	Release []string
	// Lost is the tracked partitions a full report asked for after they were
	// recorded lacks: the executor no longer holds them (lose-partitions).
	Lost []string
}

// Partitions reconciles the partitions of one report (the rules on
// partitions, in docs/architecture.md): one the leader does not track is
// released, unless its producer has not ended in the state; one it tracks
// that a full report lacks is lost, unless it was recorded after the
// report was asked for.
func Partitions(in PartitionInput) PartitionResult {
	var out PartitionResult
	tracked := make(map[string]bool, len(in.Tracked))
	for _, p := range in.Tracked {
		tracked[p.ID] = true
	}
	reported := make(map[string]bool, len(in.Reported))
	for _, p := range in.Reported {
		reported[p.ID] = true
		if !tracked[p.ID] && (in.ProducerLive == nil || !in.ProducerLive(p.ID)) {
			out.Release = append(out.Release, p.ID)
		}
	}
	if in.Partial {
		return out
	}
	for _, p := range in.Tracked {
		if !reported[p.ID] && p.Index <= in.BaseIndex {
			out.Lost = append(out.Lost, p.ID)
		}
	}
	return out
}

// cut returns s cut to at most max bytes, marked "…" when cut, and not
// in the middle of a rune: an executor's message is recorded in the
// replicated state.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "…"
	s = s[:max-len(mark)]
	for i := 0; i < utf8.UTFMax-1 && len(s) > 0; i++ {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1] // a rune cut short
	}
	return s + mark
}
