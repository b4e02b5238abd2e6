package leader

import (
	"testing"
	"time"

	"jobmaster/wire"
)

// TestMinRestartDelay: a job whose restart strategy has no delay restarts
// no sooner than MinRestartDelay after it failed, and is told when.
func TestMinRestartDelay(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 10 * time.Second, MinRestartDelay: 2 * time.Second}, t0, "e1")
	w.submit("a", `{"vertices": [{"id": "v", "parallelism": 1, "command": ["run"]}],
		"restart": {"strategy": "fixed-delay", "attempts": 100, "delay": "0s"}}`)
	if d := w.schedule(); len(d) != 1 {
		t.Fatalf("deploys %+v, want one", d)
	}
	h, _ := w.core.Heartbeat(w.read, "e1", t0)
	w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: "e1", Slots: 1,
		Executions: []wire.ExecutionStatus{{ExecutionID: "a/v/0/0", JobID: "a", Vertex: "v", State: wire.StateFailed, Message: "exit status 1"}}}, t0))
	r, next := w.core.Restarts(w.read, t0.Add(time.Second))
	if len(r.Propose) != 0 {
		t.Fatalf("restart proposed 1s after the failure: %+v", r.Propose)
	}
	if want := t0.Add(2 * time.Second); !next.Equal(want) {
		t.Fatalf("next restart at %v, want %v", next, want)
	}
	if r, _ = w.core.Restarts(w.read, t0.Add(2*time.Second)); len(r.Propose) != 1 {
		t.Fatalf("no restart proposed 2s after the failure: %+v", r.Propose)
	}
}
