package scenario

import (
	"fmt"
	"sort"
	"strings"

	"jobmaster/fsm"
	"jobmaster/wire"
)

// invariants checks, while a scenario or a property run goes on, the safety
// properties the pure cores must give. A violation is printed in the output
// as a line starting with "!!" and collected in violations.
//
// At most one attempt of a subtask alive (checkExecutors). The FSM creates
// attempt n+1 only once attempt n is terminal in the FSM, but the FSM
// deciding that attempt n ended is not the executor having stopped it. The
// FSM ends an attempt on four grounds:
//
//   - its executor reported a terminal state: it has stopped;
//   - missing: a report asked for after the acknowledgment lacked it, so the
//     executor had lost it;
//   - expired: its deployment stayed unacknowledged past the ack deadline;
//     it can start later only if a deploy request is delivered after that,
//     which the network model rules out (the bound the rule relies on);
//   - executor-lost: the executor stopped answering, and may still hold it.
//
// Only the last leaves an old attempt alive beside the new one. In
// production the lease covers it: shorter than the executor timeout, and no
// longer renewed once the executor has been silent for timeout - lease (the
// leader's heartbeats become probes), it has stopped the executor's tasks
// by the time the leader declares it lost. checkLoss checks that claim for
// executors with a lease. The simulation also has executors without a lease
// and paused machines (frozen) whose tasks pause with them, so an executor
// declared lost may hold old attempts until it answers a heartbeat sent
// after the loss was committed: that answer shows them, the reconciler
// finds them unknown and cancels them. An attempt the executor has been told to cancel but that has not
// stopped yet (CANCELING there, a task slow to die) is on its way out.
//
// So the invariant is: for every subtask, among the attempts that executors
// which are not down hold live, at most one is neither on an executor
// declared lost and not heard from since, nor being cancelled there. It is
// checked after every command and also between an executor starting tasks
// and the leader handling its answer, so a stale deployment that starts an
// old attempt beside a new one is caught even though the answer cancels it
// at once. (BUG-1 and BUG-3, found by this suite, broke it: they ended
// attempts on grounds other than these four.)
//
// A report speaks for the placement that started the task (checkRecord).
//
// Unknown executions are cancelled by the heartbeat that shows them
// (checkAfterHeartbeat): after the leader handled a heartbeat answer from an
// executor, every execution the answer showed that the executor still runs
// is expected there by the FSM or being cancelled.
//
// The FSM itself (observeState, after every log entry): a terminal job
// status or execution state never changes (until the job is forgotten); the attempt of a subtask only
// grows, by one, and only after the previous attempt's terminal state was
// recorded; the expected set of every executor holds exactly the live placed
// current attempts placed on it; no executor has more slots in use than it
// offers.
type invariants struct {
	jobEnd     map[string]fsm.JobStatus
	execEnd    map[string]wire.State
	current    map[string]fsm.Execution // subtask -> current attempt as last observed
	violations []string
}

func newInvariants() *invariants {
	return &invariants{
		jobEnd:  map[string]fsm.JobStatus{},
		execEnd: map[string]wire.State{},
		current: map[string]fsm.Execution{},
	}
}

func (v *invariants) violate(c *cluster, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	v.violations = append(v.violations, msg)
	c.out.printf("!! %s", msg)
}

// observeState checks the FSM after a log entry.
func (v *invariants) observeState(c *cluster) {
	s := c.state
	v.forgetGone(s)
	live := map[string]map[string]bool{} // executor -> live placed executions
	for _, js := range s.Jobs() {
		if old, ok := v.jobEnd[js.ID]; ok && old != js.Status {
			v.violate(c, "job %s changed from %s to %s", js.ID, old, js.Status)
		}
		if js.Status.Terminal() {
			v.jobEnd[js.ID] = js.Status
		}
		j, _ := s.Job(js.ID)
		for _, vx := range j.Vertices {
			for _, e := range vx.Subtasks {
				v.observeExecution(c, e)
				if !e.State.Terminal() && e.State != wire.StateScheduled {
					if live[e.Executor] == nil {
						live[e.Executor] = map[string]bool{}
					}
					live[e.Executor][e.ID] = true
				}
			}
		}
	}
	executors := map[string]bool{}
	for id := range c.execs {
		executors[id] = true
	}
	for _, id := range s.ExecutorsWithWork() {
		executors[id] = true
	}
	used := s.UsedSlots()
	for _, ex := range sortedStrings(executors) {
		got := map[string]bool{}
		for _, e := range s.Expected(ex) {
			got[e.ID] = true
			if e.Executor != ex || e.State.Terminal() || e.State == wire.StateScheduled {
				v.violate(c, "expected set of %s holds %s, %s on %q", ex, e.ID, e.State, e.Executor)
			}
		}
		if want := sortedStrings(live[ex]); strings.Join(want, " ") != strings.Join(sortedStrings(got), " ") {
			v.violate(c, "expected set of %s is [%s], live placed executions there are [%s]",
				ex, strings.Join(sortedStrings(got), " "), strings.Join(want, " "))
		}
		if e := c.execs[ex]; e != nil {
			for _, n := range used[ex] {
				if n >= e.slots {
					v.violate(c, "slot %s/%d in use, %s offers %d slots", ex, n, ex, e.slots)
				}
			}
		}
	}
}

// forgetGone drops what it remembers of jobs the FSM has forgotten
// (forget-jobs): their ids may be submitted again, as new jobs.
func (v *invariants) forgetGone(s *fsm.State) {
	present := map[string]bool{}
	for _, j := range s.Jobs() {
		present[j.ID] = true
	}
	for id := range v.jobEnd {
		if !present[id] {
			delete(v.jobEnd, id)
		}
	}
	gone := func(key string) bool {
		job, _, _ := strings.Cut(key, "/")
		return !present[job]
	}
	for k := range v.execEnd {
		if gone(k) {
			delete(v.execEnd, k)
		}
	}
	for k := range v.current {
		if gone(k) {
			delete(v.current, k)
		}
	}
}

func (v *invariants) observeExecution(c *cluster, e fsm.Execution) {
	sub := fmt.Sprintf("%s/%s/%d", e.Job, e.Vertex, e.Subtask)
	if prev, ok := v.current[sub]; ok && prev.Attempt != e.Attempt {
		switch {
		case e.Attempt != prev.Attempt+1:
			v.violate(c, "%s went from attempt %d to %d", sub, prev.Attempt, e.Attempt)
		case !prev.State.Terminal():
			v.violate(c, "%s started attempt %d while attempt %d was %s", sub, e.Attempt, prev.Attempt, prev.State)
		}
	}
	v.current[sub] = e
	if old, ok := v.execEnd[e.ID]; ok && old != e.State {
		v.violate(c, "execution %s changed from %s to %s", e.ID, old, e.State)
	}
	if e.State.Terminal() {
		v.execEnd[e.ID] = e.State
	}
}

// checkExecutors checks that no subtask has two attempts alive (see the type
// comment for the exact statement).
func (v *invariants) checkExecutors(c *cluster) {
	holders := map[string][]string{} // subtask -> "id on executor"
	for _, id := range c.executorIDs() {
		e := c.execs[id]
		if e.status == down || e.lostAt != 0 {
			continue
		}
		for _, x := range e.liveIDs() {
			if e.held[x].state == wire.StateCanceling {
				continue
			}
			sub := mustExecutionName(x).subtaskID()
			holders[sub] = append(holders[sub], x+" on "+id)
		}
	}
	subs := make([]string, 0, len(holders))
	for s := range holders {
		subs = append(subs, s)
	}
	sort.Strings(subs)
	for _, s := range subs {
		if h := holders[s]; len(h) > 1 {
			key := "two live attempts of " + s + ": " + strings.Join(h, ", ")
			if !v.reported(key) {
				v.violate(c, "%s", key)
			}
		}
	}
}

// reported tells whether the same violation was already reported (a
// condition that lasts is reported once).
func (v *invariants) reported(msg string) bool {
	for _, m := range v.violations {
		if m == msg {
			return true
		}
	}
	return false
}

// checkRecord checks, before the leader records what e reported, that each
// report speaks for the placement the FSM has: the task e holds under that
// id was started by a deployment of that placement. (Execution ids repeat
// when a forgotten job's id is submitted again.)
func (v *invariants) checkRecord(c *cluster, e *simExecutor, record []fsm.ReportUpdate) {
	for _, u := range record {
		x, ok := c.state.Execution(u.ID)
		t := e.held[u.ID]
		if ok && t != nil && t.placed != 0 && t.placed != x.DeployIndex {
			v.violate(c, "%s's %s was started for the placement at index %d; its %s is taken for the placement at index %d",
				e.id, u.ID, t.placed, u.State, x.DeployIndex)
		}
	}
}

// checkSource checks, as a consumer's executor fetches an input of
// execution id, that the source is what the state names: the current
// attempt of that producer subtask, FINISHED, on that executor. A consumer
// reads only the output of the attempt the replicated state names.
func (v *invariants) checkSource(c *cluster, id string, src wire.Source) {
	p, ok := c.state.Execution(src.Execution)
	if !ok {
		v.violate(c, "%s reads %s, which the state does not have", id, src.Execution)
		return
	}
	if p.State != wire.StateFinished || p.Executor != src.Executor {
		v.violate(c, "%s reads %s from %s, which the state has %s on %q", id, src.Execution, src.Executor, p.State, p.Executor)
	}
	j, _ := c.state.Job(p.Job)
	for _, vx := range j.Vertices {
		for _, e := range vx.Subtasks {
			if e.Vertex == p.Vertex && e.Subtask == p.Subtask && e.ID != p.ID {
				v.violate(c, "%s reads %s, not the current attempt %s", id, src.Execution, e.ID)
			}
		}
	}
}

// checkRelease checks, as an executor is told to delete partitions, that
// the state does not track any of them there: no partition a consumer
// still needs is deleted.
func (v *invariants) checkRelease(c *cluster, e *simExecutor, ids []string) {
	tracked := map[string]bool{}
	for _, p := range c.state.PartitionsOn(e.id) {
		tracked[p.ID] = true
	}
	for _, id := range ids {
		if tracked[id] {
			v.violate(c, "%s told to delete partition %s, which the state tracks", e.id, id)
		}
	}
}

// checkLoss checks, as executor-lost for e is committed, that e, if it has a
// lease and is up (not paused), has stopped its tasks: its lease has run
// out, as the executor timeout, longer than the lease, promises.
func (v *invariants) checkLoss(c *cluster, e *simExecutor) {
	if e.lease == 0 || e.status != up {
		return
	}
	if live := e.liveIDs(); len(live) > 0 {
		v.violate(c, "%s declared lost while it runs %s under a lease renewed %s ago",
			e.id, strings.Join(live, " "), seconds(c.now.Sub(e.lastHeartbeat)))
	}
}

// checkAfterHeartbeat checks that the leader, having handled a heartbeat
// answer from e, left nothing it showed running unless the FSM expects it
// there or a cancel is under way. (Tasks started after the report was taken
// are not in it; their deploy answers were handled when they started.)
func (v *invariants) checkAfterHeartbeat(c *cluster, e *simExecutor, report []wire.ExecutionStatus) {
	expected := map[string]bool{}
	for _, x := range c.state.Expected(e.id) {
		expected[x.ID] = true
	}
	for _, r := range report {
		t := e.held[r.ExecutionID]
		if t == nil || t.state.Terminal() || t.state == wire.StateCanceling || expected[t.id] {
			continue
		}
		v.violate(c, "%s still runs %s after a heartbeat showed it, although the leader does not expect it there", e.id, t.id)
	}
}
