package reconcile

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// Reconciler benchmarks on full reports of 10, 100 and 10,000 executions,
// all deployed and RUNNING on one executor.
//
//   - steady: the report agrees with the expected set (the common case:
//     nothing to do).
//   - drift: 1% of the reported executions are unknown and 1% of the
//     expected ones are missing from the report.
//   - leader-path: what the leader does per heartbeat answer besides the
//     HTTP round trip: decode the report's JSON, copy the expected set out
//     of the FSM (State.Expected) and reconcile.
//
// ns/op is per report.
//
//	go test -run '^$' -bench BenchmarkReconcile ./reconcile/
func BenchmarkReconcile(b *testing.B) {
	for _, n := range []int{10, 100, 10_000} {
		expected, reported := benchSets(n)
		b.Run(fmt.Sprintf("steady/execs=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := Reconcile(Input{Executor: "e1", Expected: expected, Reported: reported, BaseIndex: 10, Now: 10_000, AckDeadline: 10 * time.Second}); !r.Empty() {
					b.Fatal("steady report asks for work")
				}
			}
		})
		b.Run(fmt.Sprintf("drift/execs=%d", n), func(b *testing.B) {
			rep := append([]wire.ExecutionStatus(nil), reported...)
			drift := max(1, n/100)
			for i := 0; i < drift; i++ {
				rep[i].ExecutionID = fmt.Sprintf("ghost/v/%d/0", i)
			}
			b.ReportAllocs()
			for b.Loop() {
				r := Reconcile(Input{Executor: "e1", Expected: expected, Reported: rep, BaseIndex: 10, Now: 10_000, AckDeadline: 10 * time.Second})
				if len(r.Cancel) != drift || len(r.Missing) != drift {
					b.Fatalf("cancel %d, missing %d, want %d each", len(r.Cancel), len(r.Missing), drift)
				}
			}
		})
		b.Run(fmt.Sprintf("leader-path/execs=%d", n), func(b *testing.B) {
			st := benchState(b, n)
			body, err := json.Marshal(wire.Report{Version: wire.Version, Executor: "e1", Slots: n, UsedSlots: n, Executions: reported})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var rep wire.Report
				if err := json.Unmarshal(body, &rep); err != nil {
					b.Fatal(err)
				}
				exp := st.Expected("e1")
				if r := Reconcile(Input{Executor: "e1", Expected: exp, Reported: rep.Executions, BaseIndex: st.Index(), Now: 10_000, AckDeadline: 10 * time.Second}); !r.Empty() {
					b.Fatal("steady report asks for work")
				}
			}
		})
	}
}

// benchSets returns n deployed, RUNNING executions on e1 and the report
// that agrees with them.
func benchSets(n int) ([]fsm.Execution, []wire.ExecutionStatus) {
	expected := make([]fsm.Execution, n)
	reported := make([]wire.ExecutionStatus, n)
	for i := range expected {
		id := fsm.ExecutionID("job", "v", i, 0)
		expected[i] = fsm.Execution{ID: id, Job: "job", Vertex: "v", Subtask: i, State: wire.StateRunning, Executor: "e1",
			Slot: i, Epoch: 1, Deployed: true, DeployIndex: 2, AckIndex: 3}
		reported[i] = wire.ExecutionStatus{ExecutionID: id, JobID: "job", Vertex: "v", Subtask: i, Slot: i, State: wire.StateRunning}
	}
	return expected, reported
}

// benchState is a replicated state with one job of n subtasks placed on
// executor e1 and acknowledged RUNNING, as the leader holds it.
func benchState(b *testing.B, n int) *fsm.State {
	b.Helper()
	spec, err := jobspec.Parse(fmt.Appendf(nil, `{"vertices":[{"id":"v","parallelism":%d,"command":["/bin/true"]}]}`, n))
	if err != nil {
		b.Fatal(err)
	}
	s := fsm.NewState()
	s.ApplyEntry(1, fsm.MustEncode(&fsm.EstablishLeadership{Node: "m1"}))
	f := fsm.Fenced{Token: s.Epoch(), Time: 1}
	slots := make([]fsm.SlotAssign, n)
	ups := make([]fsm.ReportUpdate, n)
	for i := range slots {
		slots[i] = fsm.SlotAssign{Group: jobspec.DefaultSlotSharingGroup, Index: i, Executor: "e1", Slot: i}
		ups[i] = fsm.ReportUpdate{ID: fsm.ExecutionID("job", "v", i, 0), State: wire.StateRunning}
	}
	for i, c := range []fsm.Command{
		&fsm.SubmitJob{Fenced: f, ID: "job", Spec: spec},
		&fsm.PlaceRegion{Fenced: f, Job: "job", Region: 0, Slots: slots},
		&fsm.ReportExecutions{Fenced: f, Executor: "e1", Updates: ups},
	} {
		for _, r := range s.ApplyEntry(uint64(2+i), fsm.MustEncode(c)) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	return s
}
