package leader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/fsm"
	"jobmaster/wire"
)

func TestLiveness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		after time.Duration
		want  Status
	}{{0, Alive}, {2 * time.Second, Alive}, {2100 * time.Millisecond, Suspect}, {14 * time.Second, Suspect}, {15 * time.Second, Lost}} {
		if got := Liveness(t0.Add(c.after), t0, time.Second, 15*time.Second); got != c.want {
			t.Errorf("after %s: %s, want %s", c.after, got, c.want)
		}
	}
}

// TestTickLost: a newly lost executor with work gets executor-lost, once it
// commits; one without work needs no command; a paused leader restarts
// every timeout instead of declaring anyone lost.
func TestTickLost(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := Config{Heartbeat: time.Second, Timeout: 10 * time.Second, AckDeadline: 5 * time.Second}
	w := newWorld(t, cfg, t0, "e1", "e2")
	w.submit("a", `{"vertices": [{"id": "v", "parallelism": 1, "command": ["run"]}]}`)
	w.schedule() // a/v/0/0 on e1 (both have one slot, ties by id)
	var r Ready
	for s := 1; s <= 10; s++ {
		r = w.core.Tick(w.read, t0.Add(time.Duration(s)*time.Second))
	}
	if len(r.Propose) != 1 || r.Propose[0].(*fsm.ExecutorLost).Executor != "e1" {
		t.Fatalf("proposed %v, want executor-lost e1 only (e2 has no work)", r.Propose)
	}
	if got := len(r.Changes); got != 2 || r.Changes[0].To != Lost || r.Changes[1].To != Lost {
		t.Fatalf("changes %+v, want both lost", r.Changes)
	}
	// Not committed (the proposal failed): the next tick proposes it again.
	if r2 := w.core.Tick(w.read, t0.Add(11*time.Second)); len(r2.Propose) != 1 {
		t.Fatalf("after a failed proposal: %v, want executor-lost again", r2.Propose)
	}
	w.commit(r)
	if r = w.core.Tick(w.read, t0.Add(12*time.Second)); len(r.Changes)+len(r.Propose) != 0 {
		t.Fatalf("a tick after the loss committed changed something: %+v", r)
	}

	// A paused leader: 10 s pass in one tick.
	c := New(cfg, 1, t0)
	c.Refresh(t0, []Member{{ID: "e1", Addr: "e1"}}, nil)
	read := stateReader(fsm.NewState())
	r = c.Tick(read, t0.Add(10*time.Second))
	if len(r.Changes) != 0 || len(r.Events) != 1 {
		t.Fatalf("after a pause: changes %+v events %+v, want no change and one warning", r.Changes, r.Events)
	}
	// A later silence is judged from the end of the pause.
	if r = c.Tick(read, t0.Add(13*time.Second)); len(r.Changes) != 1 || r.Changes[0].To != Suspect {
		t.Fatalf("changes %+v, want e1 suspect", r.Changes)
	}
}

// An executor that answers while the executor-lost that the tick decided
// is being committed is alive: when it is lost again later, holding work
// placed on it since, its loss is proposed again (it was not, and that
// work waited on an executor gone for good until the next leader).
func TestAnExecutorRevivedWhileItsLossCommitsIsLostAgainLater(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 10 * time.Second, AckDeadline: 5 * time.Second}, t0, "e1")
	spec := `{"vertices": [{"id": "v", "parallelism": 1, "command": ["run"]}]}`
	w.submit("a", spec)
	w.schedule()
	var r Ready
	for s := 1; s <= 10; s++ {
		r = w.core.Tick(w.read, t0.Add(time.Duration(s)*time.Second))
	}
	require.Len(t, r.Propose, 1, "executor-lost")

	at := t0.Add(10*time.Second + 100*time.Millisecond)
	h, _ := w.core.Heartbeat(w.read, "e1", at)
	w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: "e1", Slots: 1}, at)
	w.commit(r)
	st, _ := w.core.Status("e1")
	require.Equal(t, Alive, st)

	w.now = at
	w.submit("b", spec)
	d := w.schedule()
	require.Len(t, d, 1)
	require.Equal(t, "e1", d[0].Executor)
	for s := 1; s <= 30; s++ {
		r = w.core.Tick(w.read, at.Add(time.Duration(s)*time.Second))
		for _, c := range r.Propose {
			if _, ok := c.(*fsm.ExecutorLost); ok {
				return
			}
		}
	}
	t.Fatal("e1 is lost again holding b's execution, and its loss is never proposed")
}
