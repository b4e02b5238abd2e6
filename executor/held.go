package executor

import (
	"fmt"
	"slices"
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
	// Bytes is the size of the partition a FINISHED producer left.
	Bytes int64
	// Note, if set, is added to the message of a failure ("disk full").
	Note string
}

// startError is a start error that names the producer executions whose
// partitions could not be fetched.
type startError interface {
	error
	Unavailable() []string
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
	// failing: the task is being stopped because an input broke; the
	// execution ends FAILED with failMsg (and the unavailable sources)
	// however its task ends, unless a cancel comes too.
	failing     bool
	failMsg     string
	unavailable []string
	// exiting: the task has exited 0, unasked, and its end is being
	// recorded (a producer's output kept first, which its streams then
	// read as complete); a cancel or a broken input from now on comes
	// after the end and changes nothing.
	exiting bool
}

func (x *execution) terminal() bool { return x.status.State.Terminal() }

// heldSet is the set of executions an executor holds, with their
// transitions. It is plain data: no I/O, no clock, no locking (the executor
// guards it). Transitions:
//
//	deploy:  (absent) -> DEPLOYING
//	started: DEPLOYING -> RUNNING, or FAILED if the start failed (with the
//	         unavailable sources the error names);
//	         CANCELING (cancelled before it started) -> stays, and the task
//	         must now be stopped; or CANCELED if it never started;
//	         failing (an input broke before it started) -> stays, and the
//	         task must now be stopped; or FAILED if it never started
//	cancel:  DEPLOYING, RUNNING -> CANCELING
//	fail:    DEPLOYING, RUNNING -> the same state, failing: the task must be
//	         stopped (an input broke); a cancelled execution ignores it
//	exiting: a live state whose task exited 0 unasked -> the same state,
//	         deaf to cancel and fail: it ends as its task did
//	exited:  any live state -> FINISHED (with its partition's bytes) /
//	         FAILED (with a note), or CANCELED if cancelled, or FAILED with
//	         the failing reason
//	ack:     terminal -> (forgotten)
//
// A failing execution keeps reporting its live state until its task has
// ended: it was not asked to stop, so it is not CANCELING.
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

// kept remembers t as FINISHED, as of at, when its execution is neither
// held nor forgotten lately but its partition p is kept here: it ran on
// this executor before a restart, which forgot it but kept what it left.
// A late deploy of it is then answered as for a forgotten execution,
// and it does not run again (which would replace the partition that
// consumers read under its id).
func (h *heldSet) kept(t wire.Task, p wire.Partition, at time.Time) {
	if _, ok := h.m[t.ExecutionID]; ok {
		return
	}
	if _, ok := h.gone[t.ExecutionID]; ok {
		return
	}
	h.gone[t.ExecutionID] = wire.ExecutionStatus{ExecutionID: t.ExecutionID, JobID: t.JobID, Vertex: t.Vertex,
		Subtask: t.Subtask, Attempt: t.Attempt, Slot: t.Slot, State: wire.StateFinished, Bytes: p.Bytes}
	h.goneAt = append(h.goneAt, goneRef{t.ExecutionID, at})
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
	case err != nil && x.failing:
		x.failed()
	case err != nil:
		x.status.State, x.status.Message = wire.StateFailed, err.Error()
		if se, ok := err.(startError); ok {
			x.status.Unavailable = se.Unavailable()
		}
	case x.canceled || x.failing:
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
	if !ok || x.terminal() || x.canceled || x.exiting {
		return false
	}
	x.canceled, x.cancelMsg = true, msg
	x.status.State = wire.StateCanceling
	return x.started
}

// fail requests that live execution id stop because an input broke,
// ending FAILED with msg and the producer executions it could not fetch
// (unavailable, added to those of an earlier failure). It reports whether
// the runtime must stop the task now (as cancel does). A cancelled
// execution is left alone: it ends CANCELED.
func (h *heldSet) fail(id, msg string, unavailable []string) (stop bool) {
	x, ok := h.m[id]
	if !ok || x.terminal() || x.canceled || x.exiting {
		return false
	}
	for _, u := range unavailable {
		if !slices.Contains(x.unavailable, u) {
			x.unavailable = append(x.unavailable, u)
		}
	}
	if x.failing {
		return false
	}
	x.failing, x.failMsg = true, msg
	return x.started
}

// failed ends x FAILED for its failing reason.
func (x *execution) failed() {
	x.status.State, x.status.Message = wire.StateFailed, x.failMsg
	if len(x.unavailable) > 0 {
		x.status.Unavailable = slices.Sorted(slices.Values(x.unavailable))
	}
}

// exiting records that id's task exited 0 while nothing was stopping it,
// and that its end is being recorded: it ends as its task did (see
// execution.exiting).
func (h *heldSet) exiting(id string) {
	if x, ok := h.m[id]; ok && !x.terminal() && !x.canceled && !x.failing {
		x.exiting = true
	}
}

// stopping reports whether id is being stopped (cancelled or failing).
func (h *heldSet) stopping(id string) bool {
	x, ok := h.m[id]
	return ok && (x.canceled || x.failing)
}

// exited records that id's task ended with res.
// commandNotFoundCode is the exit status of a shell that found no program.
const commandNotFoundCode = 127

func (h *heldSet) exited(id string, res exitResult) {
	x, ok := h.m[id]
	if !ok || x.terminal() {
		return
	}
	x.started = true
	note := func(msg string) string {
		if res.Note == "" {
			return msg
		}
		return msg + " (" + res.Note + ")"
	}
	switch {
	case x.canceled:
		x.status.State, x.status.Message = wire.StateCanceled, x.cancelMsg
	case x.failing:
		x.failed()
	case res.Message != "":
		x.status.State, x.status.Message = wire.StateFailed, note(res.Message)
	case res.Code == 0:
		x.status.State, x.status.Bytes = wire.StateFinished, res.Bytes
	case res.Code == commandNotFoundCode:
		// What a shell (or the shim) exits with when it finds no program
		// to run: the task's stderr names it.
		x.status.State, x.status.Message = wire.StateFailed, note(fmt.Sprintf("exit status %d: command not found (its stderr names it)", res.Code))
	default:
		x.status.State, x.status.Message = wire.StateFailed, note(fmt.Sprintf("exit status %d", res.Code))
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
