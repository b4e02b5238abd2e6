package leader

import (
	"testing"
	"time"

	"jobmaster/fsm"
	"jobmaster/wire"
)

func TestDrainingExecutorGetsNoPlacementAndItsWorkMovesAtTheDeadline(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, drainConfig, t0, "e1", "e2")
	w.submit("a", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}],"restart":{"strategy":"none"}}`)
	if d := w.schedule(); len(d) != 1 || d[0].Executor != "e1" {
		t.Fatalf("first placement: %+v", d)
	}
	w.apply(&fsm.DrainExecutor{Fenced: w.core.fenced(w.now), Executor: "e1", DeadlineMs: 10_000})
	w.apply(&fsm.DrainExecutor{Fenced: w.core.fenced(w.now), Executor: "e2", DeadlineMs: 10_000})
	w.submit("b", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	if p := w.core.Schedule(w.read, w.now); len(p.Propose) != 0 || !p.NoFreeSlot {
		t.Fatalf("placed on a draining executor: %+v", p)
	}
	w.apply(&fsm.UndrainExecutor{Fenced: w.core.fenced(w.now), Executor: "e2"})
	if d := w.schedule(); len(d) != 1 || d[0].Executor != "e2" {
		t.Fatalf("b goes to the eligible executor: %+v", d)
	}

	if r := w.core.Drains(w.read, t0.Add(9*time.Second)); len(r.Propose) != 0 {
		t.Fatalf("moved before the deadline: %+v", r.Propose)
	}
	r := w.commit(w.core.Drains(w.read, t0.Add(10*time.Second)))
	if !r.Kick {
		t.Fatal("a move kicks the scheduler")
	}
	var found bool
	w.st.ExpectedEach("e1", func(e *fsm.Execution) { found = found || e.State == wire.StateCanceling })
	if !found {
		t.Fatal("a/v/0/0 is not being cancelled")
	}
	if r := w.core.Drains(w.read, t0.Add(11*time.Second)); len(r.Propose) != 0 {
		t.Fatalf("moved twice: %+v", r.Propose)
	}
	view := w.core.Executors(nil, w.st.DrainStatus(), t0)
	if !view[0].Draining || view[0].Status == "drained" || view[1].Draining {
		t.Fatalf("view: %+v", view)
	}
}

func TestSelfDrainEndsWhenAnotherInstanceAnswers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, drainConfig, t0, "e1")
	w.apply(&fsm.DrainExecutor{Fenced: w.core.fenced(w.now), Executor: "e1", Self: true, Instance: "old"})
	answer := func(instance string) {
		h, _ := w.core.Heartbeat(w.read, "e1", w.now)
		w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: "e1", Slots: 1, Instance: instance}, w.now))
	}
	answer("old")
	if r := w.core.Drains(w.read, w.now); len(r.Propose) != 0 {
		t.Fatalf("the instance that asked still answers: %+v", r.Propose)
	}
	answer("new")
	w.commit(w.core.Drains(w.read, w.now))
	if w.st.Draining("e1") {
		t.Fatal("a restarted executor is still draining")
	}
}

var drainConfig = Config{Heartbeat: time.Second, Timeout: 15 * time.Second, Lease: 10 * time.Second, RPCTimeout: 2 * time.Second, AckDeadline: 10 * time.Second}
