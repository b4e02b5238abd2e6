package executor

import (
	"fmt"
	"sort"
	"time"

	"jobmaster/wire"
)

// exitResult is how an execution's task ended.
type exitResult struct {
	// Code is the exit code (128+n if the task was killed by signal n).
	Code int
	// Message, if set, explains a failure instead of "exit status <Code>".
	Message string
}

// execution is one entry of the held set.
type execution struct {
	status wire.ExecutionStatus
	// started: the runtime has started the task (or the task has already
	// ended); a stop now goes to the runtime.
	started bool
	// canceled: a cancel was requested; the execution ends CANCELED with
	// cancelMsg however its task ends.
	canceled  bool
	cancelMsg string
}

func (x *execution) terminal() bool { return x.status.State.Terminal() }

// heldSet is the set of executions an executor holds, with their
// transitions. It is plain data: no I/O, no clock, no locking (the executor
// guards it). Transitions:
//
//	deploy:  (absent) -> DEPLOYING
//	started: DEPLOYING -> RUNNING, or FAILED if the start failed;
//	         CANCELING (cancelled before it started) -> stays, and the task
//	         must now be stopped; or CANCELED if it never started
//	cancel:  DEPLOYING, RUNNING -> CANCELING
//	exited:  any live state -> FINISHED / FAILED, or CANCELED if cancelled
//	ack:     terminal -> (forgotten)
//
// Terminal states never change and are only removed by ack. A forgotten
// execution is remembered, with its last status, until prune drops it: a
// deploy of it that arrives late (a redeploy that raced the first deploy,
// delayed past the end and its acknowledgment) must not run it again.
type heldSet struct {
	m    map[string]*execution
	gone map[string]wire.ExecutionStatus
	// goneAt lists forgotten executions in the order of their ack, for
	// prune.
	goneAt []goneRef
}

type goneRef struct {
	id string
	at time.Time
}

func newHeldSet() *heldSet {
	return &heldSet{m: make(map[string]*execution), gone: make(map[string]wire.ExecutionStatus)}
}

// deploy registers t as DEPLOYING unless its execution is already held or
// was forgotten lately. It reports whether t is new (and must be started);
// a held execution is left exactly as it was.
func (h *heldSet) deploy(t wire.Task) (isNew bool) {
	if _, ok := h.m[t.ExecutionID]; ok {
		return false
	}
	if _, ok := h.gone[t.ExecutionID]; ok {
		return false
	}
	h.m[t.ExecutionID] = &execution{status: wire.ExecutionStatus{
		ExecutionID: t.ExecutionID,
		JobID:       t.JobID,
		Vertex:      t.Vertex,
		Subtask:     t.Subtask,
		Attempt:     t.Attempt,
		Slot:        t.Slot,
		State:       wire.StateDeploying,
	}}
	return true
}

// started records the outcome of starting id's task: err is nil if it runs.
// It reports whether the task must now be stopped (it was cancelled while
// it was being started).
func (h *heldSet) started(id string, err error) (stop bool) {
	x, ok := h.m[id]
	if !ok || x.terminal() || x.started {
		return false
	}
	switch {
	case err != nil && x.canceled:
		x.status.State, x.status.Message = wire.StateCanceled, x.cancelMsg
	case err != nil:
		x.status.State, x.status.Message = wire.StateFailed, err.Error()
	case x.canceled:
		x.started = true
		return true
	default:
		x.started = true
		x.status.State = wire.StateRunning
	}
	return false
}

// cancel requests that live execution id stop, ending CANCELED with msg. It
// reports whether the runtime must stop the task now (if it has not started
// yet, started will say so). Unknown, terminal and already cancelled
// executions are left alone.
func (h *heldSet) cancel(id, msg string) (stop bool) {
	x, ok := h.m[id]
	if !ok || x.terminal() || x.canceled {
		return false
	}
	x.canceled, x.cancelMsg = true, msg
	x.status.State = wire.StateCanceling
	return x.started
}

// exited records that id's task ended with res.
func (h *heldSet) exited(id string, res exitResult) {
	x, ok := h.m[id]
	if !ok || x.terminal() {
		return
	}
	x.started = true
	switch {
	case x.canceled:
		x.status.State, x.status.Message = wire.StateCanceled, x.cancelMsg
	case res.Message != "":
		x.status.State, x.status.Message = wire.StateFailed, res.Message
	case res.Code == 0:
		x.status.State = wire.StateFinished
	default:
		x.status.State, x.status.Message = wire.StateFailed, fmt.Sprintf("exit status %d", res.Code)
	}
}

// ack forgets id if it is terminal, remembering its last status as of at,
// and reports whether it did.
func (h *heldSet) ack(id string, at time.Time) bool {
	x, ok := h.m[id]
	if !ok || !x.terminal() {
		return false
	}
	delete(h.m, id)
	h.gone[id] = x.status
	h.goneAt = append(h.goneAt, goneRef{id, at})
	return true
}

// prune drops the executions forgotten before cutoff.
func (h *heldSet) prune(cutoff time.Time) {
	n := 0
	for n < len(h.goneAt) && h.goneAt[n].at.Before(cutoff) {
		delete(h.gone, h.goneAt[n].id)
		n++
	}
	if n > 0 {
		h.goneAt = append(h.goneAt[:0], h.goneAt[n:]...)
	}
}

// last returns id's status: held, or its last one if it was forgotten
// lately.
func (h *heldSet) last(id string) (wire.ExecutionStatus, bool) {
	if st, ok := h.get(id); ok {
		return st, true
	}
	st, ok := h.gone[id]
	return st, ok
}

// get returns id's status.
func (h *heldSet) get(id string) (wire.ExecutionStatus, bool) {
	x, ok := h.m[id]
	if !ok {
		return wire.ExecutionStatus{}, false
	}
	return x.status, true
}

// state returns id's state, "" if it is not held.
func (h *heldSet) state(id string) wire.State {
	if x, ok := h.m[id]; ok {
		return x.status.State
	}
	return ""
}

// canceled reports whether a cancel of id was requested.
func (h *heldSet) canceled(id string) bool {
	x, ok := h.m[id]
	return ok && x.canceled
}

// live lists the live executions' ids, sorted.
func (h *heldSet) live() []string {
	var ids []string
	for id, x := range h.m {
		if !x.terminal() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// liveCount counts the live executions.
func (h *heldSet) liveCount() int {
	n := 0
	for _, x := range h.m {
		if !x.terminal() {
			n++
		}
	}
	return n
}

// list returns every held execution, sorted by id (never nil).
func (h *heldSet) list() []wire.ExecutionStatus {
	out := make([]wire.ExecutionStatus, 0, len(h.m))
	for _, x := range h.m {
		out = append(out, x.status)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ExecutionID < out[j].ExecutionID })
	return out
}

// usedSlots counts the distinct slots of live executions.
func (h *heldSet) usedSlots() int {
	slots := make(map[int]struct{})
	for _, x := range h.m {
		if !x.terminal() {
			slots[x.status.Slot] = struct{}{}
		}
	}
	return len(slots)
}
