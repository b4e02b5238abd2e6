package leader

import (
	"fmt"
	"testing"
	"time"

	"jobmaster/fsm"
	"jobmaster/wire"
)

// TestTallyCountsWhatTheCoreDid drives the core through a placement, an
// unknown execution, a missing one with the restart it causes, and a lost
// executor, and checks what each Ready counts for the metrics.
func TestTallyCountsWhatTheCoreDid(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 10 * time.Second, AckDeadline: 5 * time.Second}, t0, "e1", "e2")
	w.st.RecordEvents()
	var total Tally
	w.submit("a", `{"vertices": [{"id": "v", "parallelism": 2, "command": ["run"]}], "restart": {"strategy": "fixed-delay", "attempts": 3, "delay": "1s"}}`)
	sched := w.commit(w.core.Schedule(w.read, t0).Ready)
	total.Add(sched.Tally)
	if total.RegionsPlaced != 1 || total.ExecutionsPlaced != 2 {
		t.Fatalf("after a placement: %+v", total)
	}
	var onE1, onE2 string
	for _, d := range sched.Deploy {
		switch d.Executor {
		case "e1":
			onE1 = d.Tasks[0].Execution.ID
		case "e2":
			onE2 = d.Tasks[0].Execution.ID
		}
	}
	// e1 acknowledges its task and also runs one nobody expects.
	r := w.commit(w.core.Partial(w.read, "e1", []wire.ExecutionStatus{
		{ExecutionID: onE1, State: wire.StateRunning},
		{ExecutionID: "ghost/v/0/0", State: wire.StateRunning},
	}, nil, t0))
	total.Add(r.Tally)
	if total.UnknownCancelled != 1 {
		t.Fatalf("unknown execution not counted: %+v", total)
	}
	// A full report taken later lacks it: missing, failed, and the job
	// restarts for it.
	t1 := t0.Add(2 * time.Second)
	h, _ := w.core.Heartbeat(w.read, "e1", t1)
	r = w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: "e1", Slots: 1}, t1)
	if r.Tally.MissingFailed != 0 {
		t.Fatalf("counted a failure before its commit: %+v", r.Tally)
	}
	if f := Failed(r); f.Tally.MissingFailed+f.Tally.UnknownCancelled != 0 {
		t.Fatalf("a failed proposal counts nothing: %+v", f.Tally)
	}
	r = w.commit(r)
	total.Add(r.Tally)
	if total.MissingFailed != 1 || total.Restarts[fsm.ReasonMissing] != 1 {
		t.Fatalf("after the missing report: %+v", total)
	}
	// e2 falls silent past the timeout: lost, and its work fails; the
	// line that says so names what failed.
	var lostLine *Event
	for s := 1; s <= 11; s++ { // ticks every second: a leader that was not paused
		r = w.commit(w.core.Tick(w.read, t0.Add(time.Duration(s)*time.Second)))
		total.Add(r.Tally)
		for i, e := range r.Events {
			if e.Msg == "executor lost: its executions ended" {
				lostLine = &r.Events[i]
			}
		}
	}
	if total.ExecutorsLost != 1 {
		t.Fatalf("after e2's timeout: %+v", total)
	}
	if lostLine == nil || fmt.Sprint(lostLine.Args) != fmt.Sprintf("[executor e2 ended 1 executions [%s]]", onE2) {
		t.Fatalf("the lost executor's line: %+v, want its execution %s", lostLine, onE2)
	}
}
