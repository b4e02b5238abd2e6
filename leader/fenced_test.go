package leader

import (
	"testing"
	"time"

	"jobmaster/fsm"
	"jobmaster/wire"
)

// An executor frozen past its lease (its own fault: the leader finds it
// suspect, then probes it). On thawing, the leader's probe is what it
// answers first: its handler expires the lease, so the answer shows the
// task CANCELING, and the task ends CANCELED a moment later, pushed. This
// leader had renewed the executor's lease before: the expiry counts, and
// a job with restart strategy none fails. (Deciding at the push, when the
// probe's answer had made the executor alive again, took it for a leader's
// absence.)
func TestAFrozenExecutorsLeaseExpiryIsCounted(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 15 * time.Second, Lease: 10 * time.Second, RPCTimeout: 2 * time.Second, AckDeadline: 10 * time.Second}, t0, "e1")
	w.submit("a", `{"vertices": [{"id": "v", "parallelism": 1, "command": ["run"]}], "restart": {"strategy": "none"}}`)
	d := w.schedule()
	id := d[0].Tasks[0].Execution.ID
	w.commit(w.core.Partial(w.read, "e1", []wire.ExecutionStatus{{ExecutionID: id, State: wire.StateRunning}}, nil, t0))

	// e1 freezes at t0: the leader finds it suspect, then lost is not
	// reached (thaw at 11s < 15s timeout).
	for s := 1; s <= 11; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		w.commit(w.core.Tick(w.read, now))
		if h, ok := w.core.Heartbeat(w.read, "e1", now); ok {
			w.core.HeartbeatFailed(h)
		}
	}
	if st, _ := w.core.Status("e1"); st != Suspect {
		t.Fatalf("e1 is %s, want suspect", st)
	}
	now := t0.Add(11500 * time.Millisecond)
	msg := wire.LeaseExpiredPrefix + "no heartbeat from a leader for 11.5s (lease 10s)"
	// The probe's answer: the lease expired in the handler, the task is
	// being stopped.
	h, _ := w.core.Heartbeat(w.read, "e1", now)
	w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: "e1", Slots: 1,
		Executions: []wire.ExecutionStatus{{ExecutionID: id, State: wire.StateCanceling}}}, now))
	// The task exits; the executor pushes its end.
	r := w.core.Partial(w.read, "e1", []wire.ExecutionStatus{{ExecutionID: id, State: wire.StateCanceled, Message: msg}}, nil, now.Add(200*time.Millisecond))
	for _, c := range r.Propose {
		if rep, ok := c.(*fsm.ReportExecutions); ok {
			for _, u := range rep.Updates {
				if u.Fenced {
					t.Errorf("the lease expiry of an executor this leader found suspect is recorded Fenced (not counted): %+v", u)
				}
			}
		}
	}
	w.commit(r)
	j, _ := w.st.Job("a")
	if j.Status != fsm.JobFailing && j.Status != fsm.JobFailed {
		t.Errorf("job a is %s, want FAILING/FAILED (restart strategy none)", j.Status)
	}
}
