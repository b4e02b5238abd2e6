package leader

import (
	"fmt"
	"testing"
	"time"

	"jobmaster/fsm"
	"jobmaster/wire"
)

func stateReader(st *fsm.State) Reader { return func(fn func(*fsm.State)) { fn(st) } }

// TestProbe: heartbeats renew the lease only while the executor has been
// silent for at most timeout - lease - RPC timeout.
func TestProbe(t *testing.T) {
	cfg := Config{Heartbeat: time.Second, Timeout: 15 * time.Second, Lease: 10 * time.Second, RPCTimeout: 2 * time.Second}
	t0 := time.Unix(100, 0)
	read := stateReader(fsm.NewState())
	for _, tc := range []struct {
		name      string
		reported  time.Duration // the executor's own lease, 0 if not reported
		silent    time.Duration
		wantProbe bool
	}{
		// 15 s timeout - 10 s lease - 2 s RPC timeout: renew for 3 s of silence.
		{"within the window", 0, 3 * time.Second, false},
		{"just past it", 0, 3001 * time.Millisecond, true},
		// A longer lease reported by the executor shortens the window.
		{"longer own lease", 12 * time.Second, 2 * time.Second, true},
		// A shorter one does not lengthen it: the configured lease counts.
		{"shorter own lease", 5 * time.Second, 3001 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(cfg, 1, t0)
			c.Refresh(t0, []Member{{ID: "e1", Addr: "e1:1", Slots: 1}}, nil)
			h, ok := c.Heartbeat(read, "e1", t0)
			if !ok {
				t.Fatal("no heartbeat to send")
			}
			c.HeartbeatAnswered(read, h, &wire.Report{Version: wire.Version, Executor: "e1", LeaseMs: tc.reported.Milliseconds()}, t0)
			h, _ = c.Heartbeat(read, "e1", t0.Add(tc.silent))
			if h.Probe != tc.wantProbe {
				t.Fatalf("silent for %s with lease %s: probe %v, want %v", tc.silent, tc.reported, h.Probe, tc.wantProbe)
			}
			if h.ProbeStarted != tc.wantProbe {
				t.Fatalf("ProbeStarted %v, want %v", h.ProbeStarted, tc.wantProbe)
			}
		})
	}
}

// TestHeartbeatAcks: acks go with the next heartbeat, and come back when it
// gets no answer.
func TestHeartbeatAcks(t *testing.T) {
	t0 := time.Unix(100, 0)
	read := stateReader(fsm.NewState())
	c := New(Config{Heartbeat: time.Second, Timeout: 15 * time.Second}, 1, t0)
	if _, ok := c.Heartbeat(read, "e1", t0); ok {
		t.Fatal("a heartbeat to an executor the table does not know")
	}
	c.Refresh(t0, []Member{{ID: "e1", Addr: "e1:1"}}, nil)
	c.QueueAcks("e1", []string{"a/v/0/0"})
	h, _ := c.Heartbeat(read, "e1", t0)
	if len(h.Ack) != 1 {
		t.Fatalf("acks %v, want a/v/0/0", h.Ack)
	}
	c.QueueAcks("e1", []string{"a/v/1/0"})
	c.HeartbeatFailed(h)
	h, _ = c.Heartbeat(read, "e1", t0)
	if got := len(h.Ack); got != 2 || h.Ack[0] != "a/v/0/0" {
		t.Fatalf("acks after a failed heartbeat %v, want [a/v/0/0 a/v/1/0]", h.Ack)
	}
	if h, _ = c.Heartbeat(read, "e1", t0); len(h.Ack) != 0 {
		t.Fatalf("acks sent twice: %v", h.Ack)
	}
}

// TestExecutorsView: a lost executor offers no free slot, and one gossip
// says failed is shown lost before it answers this session, without being
// declared lost.
func TestExecutorsView(t *testing.T) {
	t0 := time.Unix(100, 0)
	read := stateReader(fsm.NewState())
	c := New(Config{Heartbeat: time.Second, Timeout: 10 * time.Second}, 1, t0)
	c.Refresh(t0, []Member{{ID: "e1", Addr: "e1:1", Slots: 4}, {ID: "e2", Addr: "e2:1", Slots: 4, Gone: true}}, nil)
	view := c.Executors(nil, nil, t0)
	if view[0].Status != "alive" || view[1].Status != "lost" || view[1].FreeSlots != 0 {
		t.Fatalf("view %+v, want e1 alive and e2 lost with no free slot", view)
	}
	if r := c.Tick(read, t0.Add(time.Second)); len(r.Changes) != 0 {
		t.Fatalf("gossip alone changed liveness: %+v", r.Changes)
	}
	for s := 2; s <= 10; s++ {
		c.Tick(read, t0.Add(time.Duration(s)*time.Second))
	}
	if view = c.Executors(nil, nil, t0.Add(10*time.Second)); view[0].Status != "lost" || view[0].FreeSlots != 0 {
		t.Fatalf("view %+v, want e1 lost with no free slot after the timeout", view)
	}
	if *view[0].SilentMs != 10_000 {
		t.Fatalf("e1 silent for %dms, want 10000", *view[0].SilentMs)
	}
}

// A name that gossip gives another executor's address (a member announced
// by a holder of the gossip key) gets that executor's report: it is no
// answer. Nothing in it is reconciled as the named executor's (e1's task is
// not cancelled as unknown on e9), e9 never takes work, and acks go back.
func TestReportFromAnotherExecutorIsNoAnswer(t *testing.T) {
	t0 := time.Unix(100, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 15 * time.Second, AckDeadline: 10 * time.Second}, t0, "e1")
	w.submit("a", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`)
	if d := w.schedule(); len(d) != 1 || d[0].Executor != "e1" {
		t.Fatalf("deploys %+v, want one to e1", d)
	}
	running := []wire.ExecutionStatus{{ExecutionID: "a/v/0/0", JobID: "a", Vertex: "v", State: wire.StateRunning}}
	w.commit(w.core.Partial(w.read, "e1", running, nil, t0))

	w.core.Refresh(t0, []Member{{ID: "e1", Addr: "e1:1", Slots: 1}, {ID: "e9", Addr: "e1:1", Slots: 1}}, nil)
	w.core.QueueAcks("e9", []string{"x/v/0/0"})
	for s := range 5 {
		now := t0.Add(time.Duration(s) * time.Second)
		h, ok := w.core.Heartbeat(w.read, "e9", now)
		if !ok {
			t.Fatal("no heartbeat to e9")
		}
		r := w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: "e1", Slots: 1, UsedSlots: 1, Executions: running}, now)
		if len(r.Cancel) > 0 || len(r.Propose) > 0 || len(r.Deploy) > 0 || len(r.Release) > 0 {
			t.Fatalf("e1's report taken as e9's: %+v", r)
		}
	}
	if h, _ := w.core.Heartbeat(w.read, "e9", t0.Add(5*time.Second)); len(h.Ack) != 1 {
		t.Fatalf("acks for e9 after answers from e1: %v, want them kept", h.Ack)
	}
	for _, x := range w.core.schedulable(nil) {
		if x.ID == "e9" {
			t.Fatal("e9 takes work on e1's answers")
		}
	}
	if st, _ := w.core.Status("e1"); st != Alive {
		t.Fatalf("e1 is %s", st)
	}
}

// An executor that leaves gossip cleanly holding nothing (stopped, or
// decommissioned) is dropped at once and not taken on again while gossip
// lists it as left: it is never shown, nor counted, lost. One that left
// with work is kept until it is lost (its executions are failed then);
// one that comes back is taken on again.
func TestALeftExecutorWithNothingIsForgotten(t *testing.T) {
	t0 := time.Unix(100, 0)
	c := New(Config{Heartbeat: time.Second, Timeout: 15 * time.Second}, 1, t0)
	added, _ := c.Refresh(t0, []Member{{ID: "e1", Addr: "e1:1", Slots: 2}, {ID: "e2", Addr: "e2:1", Slots: 2}}, nil)
	if len(added) != 2 {
		t.Fatalf("added %v", added)
	}
	left := []Member{{ID: "e1", Addr: "e1:1", Slots: 2, Gone: true, Left: true}, {ID: "e2", Addr: "e2:1", Slots: 2, Gone: true, Left: true}}
	_, dropped := c.Refresh(t0.Add(time.Second), left, []string{"e2"})
	if len(dropped) != 1 || dropped[0] != "e1" {
		t.Fatalf("dropped %v, want e1 (e2 still has work)", dropped)
	}
	if added, _ = c.Refresh(t0.Add(2*time.Second), left, []string{"e2"}); len(added) != 0 {
		t.Fatalf("a departed executor taken on again: %v", added)
	}
	if view := c.Executors(nil, nil, t0.Add(2*time.Second)); len(view) != 1 || view[0].ID != "e2" {
		t.Fatalf("view %+v, want e2 alone", view)
	}
	// e2's work ends: it goes too.
	if _, dropped = c.Refresh(t0.Add(3*time.Second), left, nil); len(dropped) != 1 || dropped[0] != "e2" {
		t.Fatalf("dropped %v, want e2 once it holds nothing", dropped)
	}
	// e1 starts again under its name.
	if added, _ = c.Refresh(t0.Add(4*time.Second), []Member{{ID: "e1", Addr: "e1:2", Slots: 2}}, nil); len(added) != 1 || added[0] != "e1" {
		t.Fatalf("added %v, want e1 back", added)
	}
}

// What an executor says its consumer could not read goes into the Raft
// entry only as far as the consumer reads it: names of partitions that are
// not its inputs (any number of them) are dropped before the proposal.
func TestUnavailableProposedOnlyForTheConsumersInputs(t *testing.T) {
	t0 := time.Unix(100, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 15 * time.Second, AckDeadline: 10 * time.Second}, t0, "e1")
	w.submit("a", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`)
	w.schedule()
	w.commit(w.core.Partial(w.read, "e1", []wire.ExecutionStatus{{ExecutionID: "a/v/0/0", JobID: "a", Vertex: "v", State: wire.StateRunning}}, nil, t0))
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("other/p/%d/0", i)
	}
	r := w.core.Partial(w.read, "e1", []wire.ExecutionStatus{{ExecutionID: "a/v/0/0", JobID: "a", Vertex: "v", State: wire.StateFailed, Message: "x", Unavailable: names}}, nil, t0)
	var found bool
	for _, c := range r.Propose {
		if rep, ok := c.(*fsm.ReportExecutions); ok {
			for _, u := range rep.Updates {
				if u.ID == "a/v/0/0" {
					found = true
					if len(u.Unavailable) != 0 {
						t.Fatalf("%d names of other jobs' partitions proposed", len(u.Unavailable))
					}
				}
			}
		}
	}
	if !found {
		t.Fatalf("no report of a/v/0/0 proposed: %+v", r.Propose)
	}
}
