package placement

import (
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/fsm"
	"jobmaster/jobspec"
)

func needing(group string, i int, cpu, mem int64) fsm.SlotNeed {
	return fsm.SlotNeed{Group: group, Index: i, Resources: jobspec.Resources{CPUMillis: cpu, MemoryMB: mem}}
}

func capacity(cpu, mem int64) jobspec.Resources {
	return jobspec.Resources{CPUMillis: cpu, MemoryMB: mem}
}

// TestPlanCountsResources: a slot that needs resources goes where they
// are free, even if another executor has more free slots; what is in use
// and what the plan placed already count.
func TestPlanCountsResources(t *testing.T) {
	exs := []Executor{
		{ID: "big", Slots: 2, Capacity: capacity(4000, 4096)},
		{ID: "small", Slots: 8, Capacity: capacity(1000, 1024)},
	}
	p := Plan([]fsm.ReadyRegion{region("a", 0, needing("g", 0, 0, 2048), needing("g", 1, 0, 2048))}, exs)
	require.Len(t, p, 1)
	require.Equal(t, "big", p[0].Slots[0].Executor)
	require.Equal(t, "big", p[0].Slots[1].Executor)

	exs[0].InUse = capacity(0, 3000)
	p = Plan([]fsm.ReadyRegion{
		region("a", 0, needing("g", 0, 0, 2048)),  // nowhere: 1096 MiB free on big
		region("b", 0, needing("g", 0, 500, 512)), // small has the most free slots
		region("c", 0, needing("g", 0, 600, 512)), // small has 500 millis left: big
	}, exs)
	require.Len(t, p, 2)
	require.Equal(t, "b", p[0].Job)
	require.Equal(t, "small", p[0].Slots[0].Executor)
	require.Equal(t, "big", p[1].Slots[0].Executor)
}

// TestPlanResourcesAllOrNothing: a region whose last slot does not fit
// takes nothing, and what it would have taken goes to the next region.
func TestPlanResourcesAllOrNothing(t *testing.T) {
	exs := []Executor{{ID: "e1", Slots: 4, Capacity: capacity(2000, 2048)}}
	p := Plan([]fsm.ReadyRegion{
		region("big", 0, needing("g", 0, 1000, 1024), needing("g", 1, 1000, 1024), needing("g", 2, 1000, 1024)),
		region("fits", 0, needing("g", 0, 1000, 1024), needing("g", 1, 1000, 1024)),
	}, exs)
	require.Len(t, p, 1)
	require.Equal(t, "fits", p[0].Job)
	require.Equal(t, []fsm.SlotAssign{{Group: "g", Index: 0, Executor: "e1", Slot: 0}, {Group: "g", Index: 1, Executor: "e1", Slot: 1}}, p[0].Slots)
}

// TestPlanResourcesOfHeldSlots: a region joining a slot its job holds
// needs its resources free on that slot's executor.
func TestPlanResourcesOfHeldSlots(t *testing.T) {
	held := fsm.SlotNeed{Group: "g", Index: 0, Held: true, Executor: "e1", Slot: 0, Resources: capacity(0, 1024)}
	exs := []Executor{{ID: "e1", Slots: 2, Used: []int{0}, Capacity: capacity(0, 2048), InUse: capacity(0, 1536)}}
	require.Empty(t, Plan([]fsm.ReadyRegion{region("a", 1, held)}, exs), "512 MiB free, 1024 needed")
	exs[0].InUse = capacity(0, 1024)
	require.Len(t, Plan([]fsm.ReadyRegion{region("a", 1, held)}, exs), 1)
}
