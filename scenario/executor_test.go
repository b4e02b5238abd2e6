package scenario

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"jobmaster/leader"
	"jobmaster/wire"
)

// executorStatus is the condition of a simulated executor's process.
type executorStatus int

const (
	// up: answers requests and runs its tasks.
	up executorStatus = iota
	// frozen: a paused machine. It answers nothing but keeps its tasks (they
	// are paused with it) and finds them where it left them when thawed.
	frozen
	// down: the process is gone with its tasks; it answers nothing.
	down
)

func (s executorStatus) String() string {
	return [...]string{"up", "frozen", "down"}[s]
}

// simExecutor is an executor as the executor side sees it: what it holds,
// the newest fencing token it has seen, its lease, and the messages the
// network carries to and from it.
type simExecutor struct {
	id     string
	slots  int
	status executorStatus
	// parts: the partitions the executor holds (on disk: they survive a
	// restart of the process), by producer execution id.
	parts map[string]bool
	// held: every execution the executor holds, live or terminal and not yet
	// acknowledged.
	held map[string]*task
	// token is the newest fencing token the executor has seen (kept on disk:
	// it survives a restart).
	token uint64
	// lease, if not zero: the executor stops every task when no heartbeat
	// from any leader renewed it for this long. lastHeartbeat is the last
	// renewal: an admitted heartbeat that is not a probe (docs/architecture.md, The lease; a
	// restarted process has none yet), or, with renewOnAny, also an admitted
	// deploy or cancel and the process start (what package executor does; see
	// testdata/20-only-heartbeats-renew-the-lease.txt).
	lease         time.Duration
	lastHeartbeat time.Time
	renewOnAny    bool
	// muted: requests reach the executor and it acts on them, but its answers
	// are lost on the way back (an asymmetric partition, or answers too slow
	// for the leader's timeout).
	muted bool
	// inbox holds the deploy requests in flight to the executor.
	inbox []deployMsg
	// answers holds heartbeat answers in flight back to the leader.
	answers []heartbeatAnswer

	// For the invariants, not for the simulation: lostAt is the log index at
	// which the FSM declared the executor lost, 0 once the executor has
	// answered a heartbeat sent after that (so its leftovers were seen and
	// cancelled).
	lostAt uint64
}

// task is one execution on an executor.
type task struct {
	id string
	// placed is the log index of the placement whose deployment started the
	// task (for the invariants: an execution id can be placed again once its
	// job has been forgotten and submitted anew).
	placed  uint64
	state   wire.State
	message string
	// hang: the task ignores the cancel's SIGTERM, so it stays CANCELING
	// until it exits.
	hang bool
	// outputs: the task's vertex has consumers: exiting 0 leaves a
	// partition.
	outputs bool
	// unavailable: the producer executions whose partitions it could not
	// fetch (it FAILED for them).
	unavailable []string
}

// deployMsg is a deploy request in flight.
type deployMsg struct {
	id    string
	token uint64
	// placed is the execution's placement time (unix ms) and index, from the
	// FSM.
	placed int64
	index  uint64
	// outputs and inputs: the task's data edges.
	outputs bool
	inputs  []wire.Input
}

// heartbeatAnswer is an executor's report in flight to the leader that asked
// for it.
type heartbeatAnswer struct {
	hb     leader.Heartbeat // the heartbeat answered
	token  uint64
	report wire.Report
}

func newSimExecutor(id string, slots int, lease time.Duration, now time.Time) *simExecutor {
	return &simExecutor{id: id, slots: slots, lease: lease, lastHeartbeat: now, held: map[string]*task{}, parts: map[string]bool{}}
}

// heldIDs lists the held executions in id order.
func (e *simExecutor) heldIDs() []string {
	ids := make([]string, 0, len(e.held))
	for id := range e.held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// liveIDs lists the held executions that have not ended, in id order.
func (e *simExecutor) liveIDs() []string {
	var ids []string
	for _, id := range e.heldIDs() {
		if !e.held[id].state.Terminal() {
			ids = append(ids, id)
		}
	}
	return ids
}

// report is the executor's account of what it holds, as it answers a
// heartbeat.
func (e *simExecutor) report() wire.Report {
	rep := wire.Report{Version: wire.Version, Executor: e.id, Slots: e.slots, LeaseMs: e.lease.Milliseconds()}
	for _, id := range e.heldIDs() {
		rep.Executions = append(rep.Executions, e.statusOf(id))
	}
	for _, id := range e.partIDs() {
		rep.Partitions = append(rep.Partitions, wire.Partition{ID: id})
	}
	return rep
}

// partIDs lists the partitions held, in id order.
func (e *simExecutor) partIDs() []string {
	ids := make([]string, 0, len(e.parts))
	for id := range e.parts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (e *simExecutor) statusOf(id string) wire.ExecutionStatus {
	t := e.held[id]
	st := wire.ExecutionStatus{ExecutionID: id, State: t.state, Message: t.message, Unavailable: t.unavailable}
	if p, ok := parseExecutionID(id); ok {
		st.JobID, st.Vertex, st.Subtask, st.Attempt = p.job, p.vertex, p.subtask, p.attempt
	}
	return st
}

// accepts applies the executor's fencing rule to a request: a token older
// than the newest seen is refused, a newer one is remembered.
func (e *simExecutor) accepts(token uint64) bool {
	if token < e.token {
		return false
	}
	e.token = token
	return true
}

// cancel stops a live execution: CANCELED at once, or CANCELING for a task
// that ignores the signal. Unknown ids are ignored.
func (e *simExecutor) cancel(id string) {
	t := e.held[id]
	if t == nil || t.state.Terminal() {
		return
	}
	if t.hang {
		t.state = wire.StateCanceling
		return
	}
	t.state, t.message = wire.StateCanceled, ""
}

// fence is the lease expiring: every live task is stopped.
func (e *simExecutor) fence() []string {
	ids := e.liveIDs()
	for _, id := range ids {
		// As an executor does: CANCELED, with its lease message.
		e.held[id].state, e.held[id].message = wire.StateCanceled, wire.LeaseExpiredPrefix+"no heartbeat from a leader"
	}
	return ids
}

// reportString formats what an executor holds: "a/v/0/0 RUNNING, ...".
func reportString(r []wire.ExecutionStatus) string {
	if len(r) == 0 {
		return "nothing"
	}
	parts := make([]string, len(r))
	for i, s := range r {
		parts[i] = s.ExecutionID + " " + string(s.State)
	}
	return strings.Join(parts, ", ")
}

// subtaskID names a subtask: "<job>/<vertex>/<subtask>".
type executionName struct {
	job, vertex      string
	subtask, attempt int
}

func (n executionName) subtaskID() string {
	return n.job + "/" + n.vertex + "/" + strconv.Itoa(n.subtask)
}

func parseExecutionID(id string) (executionName, bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 4 {
		return executionName{}, false
	}
	sub, err1 := strconv.Atoi(parts[2])
	att, err2 := strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil {
		return executionName{}, false
	}
	return executionName{parts[0], parts[1], sub, att}, true
}

func mustExecutionName(id string) executionName {
	n, ok := parseExecutionID(id)
	if !ok {
		panic(fmt.Sprintf("bad execution id %q", id))
	}
	return n
}
