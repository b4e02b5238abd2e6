package executor

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"jobmaster/wire"
)

func TestHeldSetTransitions(t *testing.T) {
	const id = "j/v/0/0"
	type step struct {
		op    string     // deploy, started, startFailed, startUnavailable, cancel, fail, exiting, exit0, exit0bytes, exit3, exit3full, crashMsg, ack
		stop  bool       // expected "stop now" answer of started/cancel/fail
		state wire.State // expected state afterwards ("" = not held)
		msg   string
		bytes int64    // expected Bytes
		unav  []string // expected Unavailable
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"runs and finishes", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "exit0", state: wire.StateFinished},
			{op: "ack", state: ""},
		}},
		{"non-zero exit fails", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "exit3", state: wire.StateFailed, msg: "exit status 3"},
		}},
		{"shim killed fails with its message", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "crashMsg", state: wire.StateFailed, msg: "killed"},
		}},
		{"cannot start", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "startFailed", state: wire.StateFailed, msg: "command not found: x"},
			{op: "started", state: wire.StateFailed, msg: "command not found: x"},
		}},
		{"cancel a running task", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "cancel", stop: true, state: wire.StateCanceling},
			{op: "cancel", stop: false, state: wire.StateCanceling}, // idempotent
			{op: "exit3", state: wire.StateCanceled, msg: "bye"},
			{op: "cancel", stop: false, state: wire.StateCanceled, msg: "bye"},
		}},
		{"cancel while starting stops it once started", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "cancel", stop: false, state: wire.StateCanceling},
			{op: "started", stop: true, state: wire.StateCanceling},
			{op: "exit0", state: wire.StateCanceled, msg: "bye"},
		}},
		{"cancel while starting, start failed", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "cancel", state: wire.StateCanceling},
			{op: "startFailed", state: wire.StateCanceled, msg: "bye"},
		}},
		{"exit before started is recorded", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "exit0", state: wire.StateFinished},
			{op: "started", state: wire.StateFinished},
		}},
		{"ack of a live execution is ignored", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "ack", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "ack", state: wire.StateRunning},
		}},
		{"terminal states never change", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "exit0", state: wire.StateFinished},
			{op: "exit3", state: wire.StateFinished},
			{op: "cancel", state: wire.StateFinished},
			{op: "deploy", state: wire.StateFinished},
		}},
		{"unknown ids are ignored", []step{
			{op: "cancel", state: ""},
			{op: "fail", state: ""},
			{op: "started", state: ""},
			{op: "exit0", state: ""},
			{op: "ack", state: ""},
		}},
		{"a producer finishes with its partition's bytes", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "exit0bytes", state: wire.StateFinished, bytes: 42},
		}},
		{"a failure notes a full disk", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "exit3full", state: wire.StateFailed, msg: "exit status 3 (disk full)"},
		}},
		{"inputs unavailable before the start", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "startUnavailable", state: wire.StateFailed, msg: "input p/0 unavailable", unav: []string{"j/p/0/0"}},
		}},
		{"an input breaks while the task runs", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "fail", stop: true, state: wire.StateRunning},
			{op: "fail", stop: false, state: wire.StateRunning}, // once stopped, more sources only add up
			{op: "exit0", state: wire.StateFailed, msg: "input broke", unav: []string{"j/p/0/0", "j/p/1/0"}},
			{op: "fail", state: wire.StateFailed, msg: "input broke", unav: []string{"j/p/0/0", "j/p/1/0"}},
		}},
		{"an input breaks before the start: stopped once started", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "fail", stop: false, state: wire.StateDeploying},
			{op: "started", stop: true, state: wire.StateDeploying},
			{op: "exit0", state: wire.StateFailed, msg: "input broke", unav: []string{"j/p/0/0"}},
		}},
		{"an input breaks before the start, which fails", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "fail", state: wire.StateDeploying},
			{op: "startFailed", state: wire.StateFailed, msg: "input broke", unav: []string{"j/p/0/0"}},
		}},
		{"a cancel wins over a broken input", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "fail", stop: true, state: wire.StateRunning},
			{op: "cancel", stop: true, state: wire.StateCanceling},
			{op: "exit3", state: wire.StateCanceled, msg: "bye"},
		}},
		{"a cancelled execution ignores a broken input", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "cancel", stop: true, state: wire.StateCanceling},
			{op: "fail", stop: false, state: wire.StateCanceling},
			{op: "exit3", state: wire.StateCanceled, msg: "bye"},
		}},
		{"a cancel or a broken input after a clean exit changes nothing", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "exiting", state: wire.StateRunning},
			{op: "cancel", stop: false, state: wire.StateRunning},
			{op: "fail", stop: false, state: wire.StateRunning},
			{op: "exit0bytes", state: wire.StateFinished, bytes: 42},
		}},
		{"a cancel before the exit is recorded as exiting still cancels", []step{
			{op: "deploy", state: wire.StateDeploying},
			{op: "started", state: wire.StateRunning},
			{op: "cancel", stop: true, state: wire.StateCanceling},
			{op: "exiting", state: wire.StateCanceling},
			{op: "exit0", state: wire.StateCanceled, msg: "bye"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHeldSet()
			fails := 0
			for i, s := range tc.steps {
				var stop bool
				switch s.op {
				case "deploy":
					h.deploy(task("j", 0, 0, "x"))
				case "started":
					stop = h.started(id, nil)
				case "startFailed":
					stop = h.started(id, errors.New("command not found: x"))
				case "startUnavailable":
					stop = h.started(id, unavailableErr{"input p/0 unavailable", []string{"j/p/0/0"}})
				case "cancel":
					stop = h.cancel(id, "bye")
				case "fail":
					stop = h.fail(id, "input broke", []string{fmt.Sprintf("j/p/%d/0", fails%2)})
					fails++
				case "exiting":
					h.exiting(id)
				case "exit0":
					h.exited(id, exitResult{Code: 0})
				case "exit0bytes":
					h.exited(id, exitResult{Code: 0, Bytes: 42})
				case "exit3":
					h.exited(id, exitResult{Code: 3})
				case "exit3full":
					h.exited(id, exitResult{Code: 3, Note: "disk full"})
				case "crashMsg":
					h.exited(id, exitResult{Code: 137, Message: "killed"})
				case "ack":
					h.ack(id, time.Unix(0, 0))
				}
				require.Equal(t, s.stop, stop, "step %d (%s): stop", i, s.op)
				st, held := h.get(id)
				require.Equal(t, s.state != "", held, "step %d (%s): held", i, s.op)
				require.Equal(t, s.state, st.State, "step %d (%s)", i, s.op)
				require.Equal(t, s.msg, st.Message, "step %d (%s)", i, s.op)
				require.Equal(t, s.bytes, st.Bytes, "step %d (%s): bytes", i, s.op)
				require.Equal(t, s.unav, st.Unavailable, "step %d (%s): unavailable", i, s.op)
			}
		})
	}
}

// unavailableErr is a start error that names unavailable producers.
type unavailableErr struct {
	msg  string
	srcs []string
}

func (u unavailableErr) Error() string         { return u.msg }
func (u unavailableErr) Unavailable() []string { return u.srcs }

func TestHeldSetUsedSlotsAndList(t *testing.T) {
	h := newHeldSet()
	a, b, c := task("j", 0, 0, "x"), task("j", 1, 0, "x"), task("k", 0, 0, "x")
	b.Slot = 0 // shares slot 0 with a
	c.Slot = 3
	for _, tk := range []wire.Task{c, b, a} {
		require.True(t, h.deploy(tk))
	}
	require.False(t, h.deploy(a))
	require.Equal(t, 2, h.usedSlots())
	require.Equal(t, []string{"j/v/0/0", "j/v/1/0", "k/v/0/0"}, h.live())
	h.exited(c.ExecutionID, exitResult{})
	require.Equal(t, 1, h.usedSlots(), "a terminal execution uses no slot")
	ids := []string{}
	for _, st := range h.list() {
		ids = append(ids, st.ExecutionID)
	}
	require.Equal(t, []string{"j/v/0/0", "j/v/1/0", "k/v/0/0"}, ids, "terminal ones are listed until acked")
	require.NotNil(t, newHeldSet().list(), "an empty list is [] in JSON, not null")
}

// TestHeldSetProperties drives the held set with any sequence of deploy,
// start, cancel, exit, ack and heartbeat (acks of many ids) and checks the
// invariants the leader relies on after every step.
func TestHeldSetProperties(t *testing.T) {
	ids := []string{"a/v/0/0", "a/v/1/0", "a/v/0/1", "b/w/0/0", "b/w/1/0"}
	tasks := map[string]wire.Task{}
	for _, id := range ids {
		var tk wire.Task
		tk.ExecutionID = id
		tasks[id] = tk
	}
	rapid.Check(t, func(t *rapid.T) {
		h := newHeldSet()
		terminal := map[string]wire.ExecutionStatus{} // model: terminal and not acked
		canceled := map[string]bool{}                 // model: cancel requested while live
		failing := map[string]bool{}                  // model: an input broke while live
		everAcked := map[string]bool{}                // model: forgotten (never pruned here)
		for step := 0; step < 60; step++ {
			id := rapid.SampledFrom(ids).Draw(t, "id")
			before := h.list()
			beforeSt, wasHeld := h.get(id)
			acked := map[string]bool{}
			switch op := rapid.IntRange(0, 6).Draw(t, "op"); op {
			case 6:
				h.fail(id, "input broke", []string{"p/0"})
				if wasHeld && !beforeSt.State.Terminal() {
					failing[id] = true
				}
			case 0:
				tk := tasks[id]
				tk.Slot = rapid.IntRange(0, 3).Draw(t, "slot")
				isNew := h.deploy(tk)
				if everAcked[id] {
					if isNew {
						t.Fatalf("deploy of forgotten %s reported new: it would run again", id)
					}
					if _, held := h.get(id); held {
						t.Fatalf("deploy of forgotten %s holds it again", id)
					}
				}
				if wasHeld {
					if isNew {
						t.Fatalf("deploy of held %s reported new", id)
					}
					if !equalStatuses(before, h.list()) {
						t.Fatalf("deploy of held %s changed the set", id)
					}
				}
			case 1:
				var err error
				if rapid.Bool().Draw(t, "startFails") {
					err = errors.New("cannot start")
				}
				h.started(id, err)
			case 2:
				h.cancel(id, "canceled")
				if wasHeld && !beforeSt.State.Terminal() {
					canceled[id] = true
				}
			case 3:
				h.exited(id, exitResult{Code: rapid.IntRange(0, 2).Draw(t, "code")})
			case 4, 5:
				n := 1
				if op == 5 {
					n = rapid.IntRange(0, len(ids)).Draw(t, "acks")
				}
				for i := 0; i < n; i++ {
					a := id
					if op == 5 {
						a = rapid.SampledFrom(ids).Draw(t, "ack")
					}
					st, ok := h.get(a)
					forgot := h.ack(a, time.Unix(int64(step), 0))
					if forgot != (ok && st.State.Terminal()) {
						t.Fatalf("ack %s of state %q: forgot=%v", a, st.State, forgot)
					}
					if forgot {
						acked[a] = true
						everAcked[a] = true
					}
				}
			}
			// Terminal states stay, unchanged, until acked.
			for tid, want := range terminal {
				got, ok := h.get(tid)
				if acked[tid] {
					if ok {
						t.Fatalf("acked %s is still held", tid)
					}
					delete(terminal, tid)
					delete(canceled, tid)
					delete(failing, tid)
					continue
				}
				if !ok || !reflect.DeepEqual(got, want) {
					t.Fatalf("terminal %s changed or vanished without an ack: %+v -> %+v (held %v)", tid, want, got, ok)
				}
			}
			// Used slots are the distinct slots of live executions.
			slots := map[int]bool{}
			for _, st := range h.list() {
				switch st.State {
				case wire.StateDeploying, wire.StateRunning, wire.StateCanceling:
					slots[st.Slot] = true
				case wire.StateFinished, wire.StateFailed, wire.StateCanceled:
					terminal[st.ExecutionID] = st
					// A cancelled execution ends CANCELED, and only it does.
					if canceled[st.ExecutionID] != (st.State == wire.StateCanceled) {
						t.Fatalf("%s ended %s, cancel requested: %v", st.ExecutionID, st.State, canceled[st.ExecutionID])
					}
					// One whose input broke ends FAILED, unless cancelled.
					if failing[st.ExecutionID] && !canceled[st.ExecutionID] && st.State != wire.StateFailed {
						t.Fatalf("%s ended %s after its input broke", st.ExecutionID, st.State)
					}
				default:
					t.Fatalf("%s in unknown state %q", st.ExecutionID, st.State)
				}
			}
			if got, want := h.liveCount(), len(h.live()); got != want {
				t.Fatalf("live count %d, live list %d", got, want)
			}
			if got := h.usedSlots(); got != len(slots) {
				t.Fatalf("used slots %d, live executions use %d", got, len(slots))
			}
		}
	})
}

func equalStatuses(a, b []wire.ExecutionStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// A late deploy of an execution forgotten after its end does not run it
// again, and the answer shows its last status; after prune it is unknown.
func TestHeldSetRemembersForgottenExecutions(t *testing.T) {
	h := newHeldSet()
	tk := task("j", 0, 0, "x")
	require.True(t, h.deploy(tk))
	h.started(tk.ExecutionID, nil)
	h.exited(tk.ExecutionID, exitResult{Code: 0})
	t0 := time.Unix(100, 0)
	require.True(t, h.ack(tk.ExecutionID, t0))
	_, held := h.get(tk.ExecutionID)
	require.False(t, held)

	require.False(t, h.deploy(tk), "a late redeploy is not new")
	_, held = h.get(tk.ExecutionID)
	require.False(t, held, "nor held again")
	last, ok := h.last(tk.ExecutionID)
	require.True(t, ok)
	require.Equal(t, wire.StateFinished, last.State)
	require.Empty(t, h.list(), "a forgotten execution is in no report")

	h.prune(t0) // forgotten at t0, not before it
	_, ok = h.last(tk.ExecutionID)
	require.True(t, ok)
	h.prune(t0.Add(time.Nanosecond))
	_, ok = h.last(tk.ExecutionID)
	require.False(t, ok)
	require.True(t, h.deploy(tk), "long after, the id is unknown again")
}
