package leader

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/placement"
)

// Unfit is the submit-time check of a job's resources: an error naming
// the first pipelined region of spec that declares resources and could
// never be placed, nil if none. A region can never fit when it would not
// fit (placement.PlanBy with the core's policy, the scheduler's own rule:
// a region spread places may not fit packed, and the other way round)
// even with every executor the table knows idle: its slots need more than any one executor offers,
// or more than all of them together. Every executor that has reported its
// capacity counts, whatever its liveness (one that is lost may come
// back). With no capacity known yet (a new cluster, a leader before its
// first heartbeat answers) nothing is refused: the job waits, as one
// without resources does for slots.
func (c *Core) Unfit(spec *jobspec.Spec) error {
	if !declaresResources(spec) {
		return nil // most jobs: no list of the fleet to build and sort
	}
	c.mu.Lock()
	var fleet []placement.Executor
	for _, x := range c.execs {
		if !x.capacity.IsZero() && x.slots > 0 {
			fleet = append(fleet, placement.Executor{ID: x.id, Slots: x.slots, Capacity: x.capacity})
		}
	}
	c.mu.Unlock()
	if len(fleet) == 0 {
		return nil
	}
	sort.Slice(fleet, func(i, j int) bool { return fleet[i].ID < fleet[j].ID })
	for _, rg := range spec.Regions() {
		rr, ok := regionNeeds(spec, rg)
		if !ok {
			continue
		}
		if len(placement.PlanBy(c.cfg.Placement, []fsm.ReadyRegion{rr}, fleet)) == 1 {
			continue
		}
		return unfitError(spec, rg, rr, fleet)
	}
	return nil
}

// declaresResources reports whether a vertex of spec declares resources.
func declaresResources(spec *jobspec.Spec) bool {
	for i := range spec.Vertices {
		if !spec.Vertices[i].Of().IsZero() {
			return true
		}
	}
	return false
}

// regionNeeds is region rg of spec as the scheduler would see it at its
// first attempt; ok is false if none of its vertices declares resources.
func regionNeeds(spec *jobspec.Spec, rg jobspec.Region) (fsm.ReadyRegion, bool) {
	type gi struct {
		group string
		index int
	}
	at := make(map[gi]int)
	var rr fsm.ReadyRegion
	any := false
	for _, vi := range rg.Vertices {
		v := &spec.Vertices[vi]
		res := v.Of()
		any = any || !res.IsZero()
		for i := 0; i < v.Parallelism; i++ {
			rr.Executions++
			k := gi{v.SlotSharingGroup, i}
			if n, ok := at[k]; ok {
				rr.Keys[n].Resources = rr.Keys[n].Resources.Add(res)
				continue
			}
			at[k] = len(rr.Keys)
			rr.Keys = append(rr.Keys, fsm.SlotNeed{Group: k.group, Index: i, Resources: res})
		}
	}
	return rr, any
}

// unfitError says why region rg does not fit the fleet.
func unfitError(spec *jobspec.Spec, rg jobspec.Region, rr fsm.ReadyRegion, fleet []placement.Executor) error {
	ids := make([]string, len(rg.Vertices))
	for i, vi := range rg.Vertices {
		ids[i] = spec.Vertices[vi].ID
	}
	name := "region of vertices " + strings.Join(ids, ", ")
	var largest, need, offer jobspec.Resources
	for _, k := range rr.Keys {
		need = need.Add(k.Resources)
		if k.Resources.CPUMillis > largest.CPUMillis || k.Resources.MemoryMB > largest.MemoryMB {
			largest = jobspec.Resources{CPUMillis: max(largest.CPUMillis, k.Resources.CPUMillis), MemoryMB: max(largest.MemoryMB, k.Resources.MemoryMB)}
		}
	}
	var most jobspec.Resources
	slots := 0
	fitsOne := false
	for _, e := range fleet {
		offer = offer.Add(e.Capacity)
		slots += e.Slots
		most = jobspec.Resources{CPUMillis: max(most.CPUMillis, e.Capacity.CPUMillis), MemoryMB: max(most.MemoryMB, e.Capacity.MemoryMB)}
		fitsOne = fitsOne || largest.Fits(e.Capacity)
	}
	if !fitsOne {
		return fmt.Errorf("%s can never fit: a slot of it needs %s, more than any of the %d executors known offers (the most: %s)",
			name, largest, len(fleet), most)
	}
	if most := mostPlaced(rr.Keys, fleet); most < len(rr.Keys) {
		return fmt.Errorf("%s can never fit: it needs its %d slots at once (%s in all), and the %d executors known could hold at most %d of them, counting each one's CPU and memory (%s) and its slots",
			name, len(rr.Keys), need, len(fleet), most, capacities(fleet))
	}
	return fmt.Errorf("%s can never fit: its %d slots need %s in all, and the %d executors known offer %d slots and %s in all",
		name, len(rr.Keys), need, len(fleet), slots, offer)
}

// mostPlaced is a bound on how many of keys the fleet could hold at once:
// an executor holds no more than its slots, nor more than the most keys
// whose CPU fits its CPU (the smallest ones), nor than the most whose
// memory fits its memory. No placement holds more, so a bound below
// len(keys) explains a region that never fits where the totals would.
func mostPlaced(keys []fsm.SlotNeed, fleet []placement.Executor) int {
	cpu := make([]int64, len(keys))
	mem := make([]int64, len(keys))
	for i, k := range keys {
		cpu[i], mem[i] = k.Resources.CPUMillis, k.Resources.MemoryMB
	}
	slices.Sort(cpu)
	slices.Sort(mem)
	// within is how many of the smallest of needs fit in capacity c.
	within := func(needs []int64, c int64) int {
		var sum int64
		for i, n := range needs {
			if sum += n; sum > c {
				return i
			}
		}
		return len(needs)
	}
	total := 0
	for _, e := range fleet {
		total += min(e.Slots, within(cpu, e.Capacity.CPUMillis), within(mem, e.Capacity.MemoryMB))
	}
	return min(total, len(keys))
}

// capacities lists what each executor of fleet offers, the same offers
// once with their count.
func capacities(fleet []placement.Executor) string {
	var order []jobspec.Resources
	count := map[jobspec.Resources]int{}
	for _, e := range fleet {
		if count[e.Capacity] == 0 {
			order = append(order, e.Capacity)
		}
		count[e.Capacity]++
	}
	parts := make([]string, len(order))
	for i, c := range order {
		parts[i] = c.String()
		if count[c] > 1 {
			parts[i] = fmt.Sprintf("%d offer %s each", count[c], c)
		} else {
			parts[i] = "one offers " + c.String()
		}
	}
	return strings.Join(parts, "; ")
}
