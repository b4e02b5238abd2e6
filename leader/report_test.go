package leader

import (
	"slices"
	"testing"
	"time"

	"jobmaster/fsm"
	"jobmaster/wire"
)

// TestDeployCancelAck follows one job through the core: placed and deployed
// per executor, acknowledged by the deploy's answer, cancelled once when
// the state asks for it, and its end acknowledged after it is recorded.
func TestDeployCancelAck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 10 * time.Second, AckDeadline: 5 * time.Second}, t0, "e1", "e2")
	w.submit("a", `{"vertices": [{"id": "v", "parallelism": 2, "command": ["run"]}]}`)
	deploys := w.schedule()
	if len(deploys) != 2 || deploys[0].Executor != "e1" || deploys[1].Executor != "e2" || len(deploys[0].Tasks) != 1 {
		t.Fatalf("deploys %+v, want one task on each of e1 and e2", deploys)
	}
	id := deploys[0].Tasks[0].Execution.ID

	// The deploy's answer acknowledges the deployment.
	r := w.core.Partial(w.read, "e1", []wire.ExecutionStatus{{ExecutionID: id, State: wire.StateRunning}}, nil, t0)
	if len(r.Propose) != 1 {
		t.Fatalf("answer: proposed %v, want the report recorded", r.Propose)
	}
	w.commit(r)
	if x, _ := w.st.Execution(id); !x.Deployed {
		t.Fatalf("%s not deployed after its answer: %+v", id, x)
	}

	// A cancel of the job: one cancel per executor, sent once.
	w.apply(&fsm.CancelJob{Fenced: w.core.fenced(t0), ID: "a"})
	r = w.core.Cancels(w.read)
	if len(r.Cancel) != 2 || !slices.Equal(r.Cancel[0].IDs, []string{id}) {
		t.Fatalf("cancels %+v, want one per executor", r.Cancel)
	}
	if r = w.core.Cancels(w.read); len(r.Cancel) != 0 {
		t.Fatalf("cancels sent twice: %+v", r.Cancel)
	}

	// e1's report shows it CANCELED: recorded, then acknowledged.
	h, _ := w.core.Heartbeat(w.read, "e1", t0.Add(time.Second))
	r = w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: "e1",
		Executions: []wire.ExecutionStatus{{ExecutionID: id, State: wire.StateCanceled}}}, t0.Add(time.Second))
	if len(r.Ack) != 0 {
		t.Fatalf("acked %v before the state was recorded", r.Ack)
	}
	r = w.commit(r)
	if !slices.Equal(r.Ack, []string{id}) || !r.Kick {
		t.Fatalf("after commit: acks %v kick %v, want [%s] and a kick", r.Ack, r.Kick, id)
	}
	// A failed proposal keeps only what needed no commit.
	if f := Failed(Ready{Propose: []fsm.Command{&fsm.ForgetJobs{}}, Ack: []string{"x"}, Cancel: []Cancel{{Executor: "e1"}}}); len(f.Propose)+len(f.Cancel) != 0 || len(f.Ack) != 1 {
		t.Fatalf("Failed kept %+v", f)
	}
}

// TestScheduleOnlyAnswered: a new session places nothing on an executor
// until it has answered one of its heartbeats.
func TestScheduleOnlyAnswered(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 10 * time.Second}, t0)
	w.core.Refresh(t0, []Member{{ID: "e1", Addr: "e1:1", Slots: 2}}, nil)
	w.submit("a", `{"vertices": [{"id": "v", "parallelism": 1, "command": ["run"]}]}`)
	if p := w.core.Schedule(w.read, t0); !p.NoFreeSlot {
		t.Fatalf("plan %+v, want no free slot (e1 has not answered)", p)
	}
	h, _ := w.core.Heartbeat(w.read, "e1", t0)
	w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: "e1", Slots: 2}, t0))
	if d := w.schedule(); len(d) != 1 || d[0].Executor != "e1" {
		t.Fatalf("deploys %+v, want a/v/0/0 on e1", d)
	}
}

// TestNoPlacementOnFullDisk: an executor whose report says its disk is
// full gets no new work until a report says it cleared.
func TestNoPlacementOnFullDisk(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 10 * time.Second}, t0)
	w.core.Refresh(t0, []Member{{ID: "e1", Addr: "e1:1", Slots: 2}}, nil)
	answer := func(full bool) Ready {
		h, _ := w.core.Heartbeat(w.read, "e1", t0)
		return w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: "e1", Slots: 2, DiskFull: full,
			StorageError: "cannot write the lease file: no space left on device"}, t0))
	}
	answer(true)
	w.submit("a", `{"vertices": [{"id": "v", "parallelism": 1, "command": ["run"]}]}`)
	if p := w.core.Schedule(w.read, t0); !p.NoFreeSlot {
		t.Fatalf("plan %+v, want no free slot (e1's disk is full)", p)
	}
	view := w.core.Executors(nil, nil, t0)
	if !view[0].DiskFull || view[0].StorageError == "" {
		t.Fatalf("view %+v, want e1 with disk_full and its storage error", view[0])
	}
	if r := answer(false); !r.Kick {
		t.Fatal("a cleared disk did not kick the scheduler")
	}
	if d := w.schedule(); len(d) != 1 || d[0].Executor != "e1" {
		t.Fatalf("deploys %+v, want a/v/0/0 on e1 once its disk cleared", d)
	}
}
