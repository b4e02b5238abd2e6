package placement

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"jobmaster/fsm"
	"jobmaster/jobspec"
)

// TestPlanDoesNotDependOnExecutorOrder: the leader lists its executors in
// no order, so a plan must be the same whatever the order; and every new
// slot it hands out is free (below the executor's count, not in use, not
// handed out twice), at most as many on an executor as its count leaves.
// Resources and held keys make regions fail half-way, so the undoing of a
// region's slots is drawn too.
func TestPlanDoesNotDependOnExecutorOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var execs []Executor
		for i := range rapid.IntRange(0, 6).Draw(t, "executors") {
			e := Executor{ID: fmt.Sprintf("e%d", i), Slots: rapid.IntRange(0, 6).Draw(t, "slots"),
				Capacity: jobspec.Resources{CPUMillis: rapid.Int64Range(0, 4000).Draw(t, "cpu"), MemoryMB: rapid.Int64Range(0, 4000).Draw(t, "mem")}}
			for n := range 9 {
				if rapid.IntRange(0, 3).Draw(t, "used") == 0 {
					e.Used = append(e.Used, n)
				}
			}
			e.Used = rapid.Permutation(e.Used).Draw(t, "used order")
			execs = append(execs, e)
		}
		var regions []fsm.ReadyRegion
		for j := range rapid.IntRange(1, 8).Draw(t, "regions") {
			var keys []fsm.SlotNeed
			for k := range rapid.IntRange(1, 5).Draw(t, "keys") {
				n := fsm.SlotNeed{Group: rapid.SampledFrom([]string{"", "g"}).Draw(t, "group"), Index: k}
				switch rapid.IntRange(0, 4).Draw(t, "kind") {
				case 0:
					n.Resources = jobspec.Resources{CPUMillis: rapid.Int64Range(0, 2000).Draw(t, "need cpu"), MemoryMB: rapid.Int64Range(0, 2000).Draw(t, "need mem")}
				case 1:
					if len(execs) > 0 {
						n.Held, n.Executor, n.Slot = true, rapid.SampledFrom(execs).Draw(t, "holder").ID, 100+k
					}
				}
				keys = append(keys, n)
			}
			regions = append(regions, region(fmt.Sprintf("j%d", j%3), j, keys...))
		}
		policy := rapid.SampledFrom([]Policy{Spread, Pack}).Draw(t, "policy")
		plan := PlanBy(policy, regions, execs)
		shuffled := rapid.Permutation(execs).Draw(t, "executor order")
		if again := PlanBy(policy, regions, shuffled); !slices.EqualFunc(plan, again, samePlacement) {
			t.Fatalf("plans differ with the executors reordered:\n%+v\n%+v", plan, again)
		}
		byID := map[string]Executor{}
		for _, e := range execs {
			byID[e.ID] = e
		}
		given := map[string]map[int]bool{}
		for _, p := range plan {
			for i, a := range p.Slots {
				r := regions[slices.IndexFunc(regions, func(r fsm.ReadyRegion) bool { return r.Job == p.Job && r.Region == p.Region })]
				if r.Keys[i].Held || a.Slot >= 100 {
					continue
				}
				e := byID[a.Executor]
				if a.Slot >= e.Slots || slices.Contains(e.Used, a.Slot) {
					t.Fatalf("slot %d of %+v handed out", a.Slot, e)
				}
				if given[a.Executor] == nil {
					given[a.Executor] = map[int]bool{}
				}
				given[a.Executor][a.Slot] = true
			}
		}
		for id, g := range given {
			if len(g) > freeCount(byID[id]) {
				t.Fatalf("%d slots of %s handed out, %d free", len(g), id, freeCount(byID[id]))
			}
		}
	})
}

func samePlacement(a, b Placement) bool {
	return a.Job == b.Job && a.Region == b.Region && a.Executions == b.Executions && slices.Equal(a.Slots, b.Slots)
}
