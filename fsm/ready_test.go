package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
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

// The ready queue yields its regions in order (submit index, job id,
// region), whatever regions came and went, and stops when told.
func TestReadyQueueYieldsInOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := newReadyQueue()
		in := map[regionRef]uint64{}
		for range rapid.IntRange(0, 200).Draw(t, "steps") {
			r := regionRef{fmt.Sprintf("j%d", rapid.IntRange(0, 30).Draw(t, "job")), rapid.IntRange(0, 3).Draw(t, "region")}
			if rapid.Bool().Draw(t, "add") {
				submit := uint64(len(r.job)) * 7 % 5 // a job keeps its index; several share one
				q.add(r, submit)
				in[r] = submit
			} else {
				q.remove(r)
				delete(in, r)
			}
		}
		want := make([]readyItem, 0, len(in))
		for r, s := range in {
			want = append(want, readyItem{r, s})
		}
		slices.SortFunc(want, readyItem.compare)
		got := []readyItem{}
		q.inOrder(func(it readyItem) bool { got = append(got, it); return true })
		require.Equal(t, want, got)
		stop := rapid.IntRange(0, len(want)).Draw(t, "stop")
		got = got[:0]
		q.inOrder(func(it readyItem) bool { got = append(got, it); return len(got) < stop })
		require.Equal(t, want[:max(stop, min(1, len(want)))], got)
	})
}

// A pass over a queue of thousands of small jobs lists the few the free
// slots take, and those before them too big for them: not the queue.
func TestReadyRegionsWithinStopsOnceTheFreeSlotsAreSurelyTaken(t *testing.T) {
	h := newHarness(t)
	h.establish("m1")
	require.NoError(t, h.submit("giant", giants(1, 50)).Err)
	for i := range 2000 {
		require.NoError(t, h.submit(fmt.Sprintf("j%04d", i), `{"vertices":[{"id":"v","parallelism":10,"command":["x"]}]}`).Err)
	}
	jobs := func(rs []ReadyRegion) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Job)
		}
		return out
	}
	ready, tooBig := h.s.ReadyRegionsWithin(40)
	require.Equal(t, []string{"giant"}, jobs(tooBig), "too big, before the cut")
	require.Equal(t, []string{"j0000", "j0001", "j0002", "j0003"}, jobs(ready), "four surely take the 40 slots")
	// With 35 free, the fourth does not fit what the three leave: the
	// pass looks at most maxSkipped regions further for one that would.
	ready, _ = h.s.ReadyRegionsWithin(35)
	require.Equal(t, []string{"j0000", "j0001", "j0002"}, jobs(ready))
	allocs := testing.AllocsPerRun(5, func() { h.s.ReadyRegionsWithin(40) })
	require.Less(t, allocs, 100.0, "allocations per pass")
	checkInvariants(t, h.s)
}

// A region that declares resources may not fit, nor one that shares a
// slot its job holds on an executor that may drain: they take no slot
// surely, and the regions after them are listed until others surely take
// the free slots.
func TestReadyRegionsWithinListsPastRegionsThatMayNotFit(t *testing.T) {
	h := newHarness(t)
	h.establish("m1")
	require.NoError(t, h.submit("a", `{"vertices":[{"id":"v","parallelism":10,"command":["x"],"resources":{"memory_mb":1}}]}`).Err)
	for i := range 5 {
		require.NoError(t, h.submit(fmt.Sprintf("j%d", i), `{"vertices":[{"id":"v","parallelism":10,"command":["x"]}]}`).Err)
	}
	var jobs []string
	ready, _ := h.s.ReadyRegionsWithin(20)
	for _, r := range ready {
		jobs = append(jobs, r.Job)
	}
	require.Equal(t, []string{"a", "j0", "j1"}, jobs)
}

// A scheduling pass over a queue of 18,000 small jobs with 100 free slots.
func BenchmarkReadyRegionsBacklog(b *testing.B) {
	h := newHarness(b)
	h.establish("m1")
	for i := range 18000 {
		require.NoError(b, h.submit(fmt.Sprintf("j%05d", i), `{"vertices":[{"id":"v","parallelism":10,"command":["x"]}]}`).Err)
	}
	b.ReportAllocs()
	for b.Loop() {
		h.s.ReadyRegionsWithin(100)
	}
}
