package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// giants is a job of n independent vertices of parallelism p: n regions
// that each need p slots.
func giants(n, p int) string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf(`{"id":"v%d","parallelism":%d,"command":["x"]}`, i, p)
	}
	return `{"vertices":[` + strings.Join(vs, ",") + `]}`
}

// Regions too big for the free slots are left out of a scheduling pass
// without their keys being listed: a job of many regions that can never
// fit cost every pass a walk over all its subtasks (a submit token's
// thousand regions of a hundred subtasks stalled the leader). The bound
// on allocations is a few per region, where listing each region's
// hundred keys took several times that.
func TestReadyRegionsWithinSkipsRegionsTooBig(t *testing.T) {
	h := newHarness(t)
	h.establish("m1")
	require.NoError(t, h.submit("giants", giants(200, 100)).Err)
	require.NoError(t, h.submit("small", `{"vertices":[{"id":"v","parallelism":2,"command":["x"]}]}`).Err)

	ready, tooBig := h.s.ReadyRegionsWithin(8)
	require.Len(t, ready, 1)
	require.Equal(t, "small", ready[0].Job)
	require.Len(t, tooBig, 200)
	allocs := testing.AllocsPerRun(5, func() { h.s.ReadyRegionsWithin(8) })
	require.Less(t, allocs, float64(3*200), "allocations per pass")
}

func BenchmarkReadyRegionsWithWaitingGiants(b *testing.B) {
	h := newHarness(b)
	h.establish("m1")
	require.NoError(b, h.submit("giants", giants(1000, 100)).Err)
	for _, free := range []int{-1, 8} {
		b.Run(fmt.Sprintf("free=%d", free), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.s.ReadyRegionsWithin(free)
			}
		})
	}
}

// Slots a job holds in one slot sharing group do not count for another:
// a region of group y waits whole however many slots the job's group x
// holds.
func TestReadyRegionsWithinCountsHeldSlotsByGroup(t *testing.T) {
	h := newHarness(t)
	h.establish("m1")
	require.NoError(t, h.submit("j", `{"vertices":[{"id":"x","parallelism":20,"command":["c"],"slot_sharing_group":"x"},
		{"id":"y","parallelism":20,"command":["c"],"slot_sharing_group":"y"}]}`).Err)
	var x ReadyRegion
	for _, r := range h.s.ReadyRegions() {
		if len(r.Keys) > 0 && r.Keys[0].Group == "x" {
			x = r
		}
	}
	slots := make([]SlotAssign, len(x.Keys))
	for i, k := range x.Keys {
		slots[i] = SlotAssign{Group: k.Group, Index: k.Index, Executor: "e1", Slot: i}
	}
	require.NoError(t, h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "j", Region: x.Region, Slots: slots}).Err)

	ready, tooBig := h.s.ReadyRegionsWithin(8)
	require.Empty(t, ready)
	require.Len(t, tooBig, 1, "group y's region, which needs 20 new slots")
}
