package placement

import (
	"fmt"
	"testing"

	"jobmaster/fsm"
	"jobmaster/jobspec"
)

// Placement benchmarks: 10,000 subtasks onto 1,000 executors of 10 slots
// (an exact fit), as one job of 10,000 subtasks (one region, all or nothing)
// or as 1,000 jobs of 10. subtasks/s is 10,000 divided by the time per op.
//
//   - plan: Plan alone, from the ready regions and the executors.
//
//   - pass: one scheduler pass as the leader runs it, without the network:
//     read the ready regions and used slots from the FSM, plan, encode the
//     place-region commands into one entry, and apply it (decode included).
//
//     go test -run '^$' -bench BenchmarkPlace ./placement/
func BenchmarkPlace(b *testing.B) {
	const executors, slots, subtasks = 1000, 10, 10_000
	shapes := []struct {
		name        string
		jobs, width int
	}{
		{"1x10000", 1, subtasks},
		{"1000x10", 1000, 10},
	}
	for _, sh := range shapes {
		b.Run("plan/"+sh.name, func(b *testing.B) {
			st := submitted(b, sh.jobs, sh.width)
			ready := st.ReadyRegions()
			exs := benchExecutors(executors, slots)
			b.ReportAllocs()
			for b.Loop() {
				if p := Plan(ready, exs); placedCount(p) != subtasks {
					b.Fatalf("placed %d of %d", placedCount(p), subtasks)
				}
			}
			b.ReportMetric(subtasks/(b.Elapsed().Seconds()/float64(b.N)), "subtasks/s")
		})
		b.Run("pass/"+sh.name, func(b *testing.B) {
			exs := benchExecutors(executors, slots)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				st := submitted(b, sh.jobs, sh.width)
				b.StartTimer()
				ready := st.ReadyRegions()
				used := st.UsedSlots()
				for k := range exs {
					exs[k].Used = used[exs[k].ID]
				}
				plan := Plan(ready, exs)
				cmds := make([]fsm.Command, len(plan))
				for k, p := range plan {
					cmds[k] = p.Command(st.Epoch(), 2)
				}
				placed := 0
				for _, r := range st.ApplyEntry(st.Index()+1, fsm.MustEncode(cmds...)) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					placed += len(r.Placed)
				}
				if placed != subtasks {
					b.Fatalf("placed %d of %d", placed, subtasks)
				}
			}
			b.ReportMetric(subtasks/(b.Elapsed().Seconds()/float64(b.N)), "subtasks/s")
		})
	}
}

func placedCount(p []Placement) int {
	n := 0
	for _, x := range p {
		n += x.Executions
	}
	return n
}

func benchExecutors(n, slots int) []Executor {
	out := make([]Executor, n)
	for i := range out {
		out[i] = Executor{ID: fmt.Sprintf("e%04d", i), Slots: slots}
	}
	return out
}

// submitted is a state holding jobs one-vertex jobs of width subtasks each,
// all ready to be placed.
func submitted(b *testing.B, jobs, width int) *fsm.State {
	b.Helper()
	spec, err := jobspec.Parse(fmt.Appendf(nil, `{"vertices":[{"id":"v","parallelism":%d,"command":["/bin/true"]}]}`, width))
	if err != nil {
		b.Fatal(err)
	}
	s := fsm.NewState()
	s.ApplyEntry(1, fsm.MustEncode(&fsm.EstablishLeadership{Node: "m1"}))
	f := fsm.Fenced{Token: s.Epoch(), Time: 1}
	cmds := make([]fsm.Command, jobs)
	for j := range cmds {
		cmds[j] = &fsm.SubmitJob{Fenced: f, ID: fmt.Sprintf("job-%04d", j), Spec: spec}
	}
	for _, r := range s.ApplyEntry(2, fsm.MustEncode(cmds...)) {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	return s
}
