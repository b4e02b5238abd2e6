// Package placement decides where ready regions run. It is pure: given the
// regions waiting for slots and the executors with their free slots, Plan
// returns placements; the leader proposes them and the FSM accepts or
// rejects each (a placement computed from an old view can be stale).
//
// Rules:
//   - a region is placed all or nothing: every slot key (slot sharing group,
//     subtask index) it needs gets a slot, or the region waits;
//   - a key already held by a live execution of the same job (or placed
//     earlier in the same plan) reuses that slot: subtask i of every vertex
//     of a slot sharing group shares one slot;
//   - each new slot goes to the executor with the most free slots (ties by
//     id), which spreads work across executors (Spread, the default); with
//     Pack, to the one with the fewest free slots that has one (ties by
//     id), which fills executors one after another;
//   - a slot whose executions declare resources goes only to an executor
//     whose free resources (its capacity less what its live executions
//     and the plan's earlier placements need) cover them, the one with the
//     most (Pack: fewest) free slots among those (ties by id); a key held
//     or placed earlier adds its needs to that slot's executor, which must
//     have them free too. A slot without resources is placed by slots
//     alone;
//   - regions are considered in the order given (oldest job first); one that
//     does not fit is skipped and later, smaller ones may still run.
package placement

import (
	"container/heap"
	"fmt"

	"jobmaster/fsm"
	"jobmaster/jobspec"
)

// Policy is which executor Plan gives a new slot.
type Policy int

const (
	// Spread gives it to the executor with the most free slots: work
	// spreads over the executors, and a job's subtasks over as many of
	// them as it has slot keys.
	Spread Policy = iota
	// Pack gives it to the executor with the fewest free slots that has
	// one: executors fill one after another, as Nomad's binpack and
	// Flink's default slot allocation do. A small job runs on one or two
	// executors, with as many deployments and its exchanges mostly local,
	// and whole executors stay free for wide jobs; a busy one runs more of
	// the work, and its loss fails more at once.
	Pack
)

// ParsePolicy reads a policy by name: spread or pack.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "spread":
		return Spread, nil
	case "pack":
		return Pack, nil
	}
	return Spread, fmt.Errorf("unknown placement policy %q: use spread or pack", s)
}

func (p Policy) String() string {
	if p == Pack {
		return "pack"
	}
	return "spread"
}

// Executor is an executor that can take work.
type Executor struct {
	ID string
	// Slots is how many slots it offers: it takes new work only while
	// fewer than Slots of its slot numbers are in use, whatever the
	// numbers (one restarted with fewer slots may still hold numbers at or
	// above Slots until those executions end).
	Slots int
	// Used are the slot numbers in use, each once.
	Used []int
	// Capacity is what it offers for tasks' resources, and InUse what its
	// live executions need of it.
	Capacity jobspec.Resources
	InUse    jobspec.Resources
}

// Placement is one region's assignment, ready to become a PlaceRegion
// command.
type Placement struct {
	Job    string
	Region int
	Slots  []fsm.SlotAssign
	// Executions is the number of executions the placement starts.
	Executions int
}

type key struct {
	job, group string
	index      int
}

type ref struct {
	executor string
	slot     int
}

// Plan places as many of the regions as fit, spreading (Spread).
func Plan(regions []fsm.ReadyRegion, executors []Executor) []Placement {
	return PlanBy(Spread, regions, executors)
}

// PlanBy places as many of the regions as fit, by policy.
func PlanBy(policy Policy, regions []fsm.ReadyRegion, executors []Executor) []Placement {
	h := newFreeHeap(executors, policy == Pack)
	held := make(map[key]ref)
	var out []Placement
	var undo []taken
	for _, r := range regions {
		need := 0
		for i := range r.Keys {
			k := &r.Keys[i]
			if _, ok := held[key{r.Job, k.Group, k.Index}]; !k.Held && !ok {
				need++
			}
		}
		if need > h.free {
			continue
		}
		p := Placement{Job: r.Job, Region: r.Region, Executions: r.Executions, Slots: make([]fsm.SlotAssign, 0, len(r.Keys))}
		// Only a region that needs resources can fail once begun: only
		// then is what it takes recorded, to be given back.
		undo = undo[:0]
		record := needsResources(r)
		fits := true
		for i := range r.Keys {
			k := &r.Keys[i]
			kk := key{r.Job, k.Group, k.Index}
			var at ref
			switch prev, ok := held[kk]; {
			case k.Held:
				at = ref{k.Executor, k.Slot}
			case ok:
				at = prev
			default:
				if k.Resources.IsZero() {
					at = h.takeFrom(h.items[0])
				} else if fe := h.fitting(k.Resources); fe != nil {
					at = h.takeFrom(fe)
				} else {
					fits = false
				}
				if fits {
					held[kk] = at
					if record {
						undo = append(undo, taken{key: kk, at: at})
					}
				}
			}
			if fits && !k.Resources.IsZero() {
				if fits = h.charge(at.executor, k.Resources); fits {
					undo = append(undo, taken{charged: true, at: at, res: k.Resources})
				}
			}
			if !fits {
				break
			}
			p.Slots = append(p.Slots, fsm.SlotAssign{Group: k.Group, Index: k.Index, Executor: at.executor, Slot: at.slot})
		}
		if !fits {
			h.undo(undo, held)
			continue
		}
		out = append(out, p)
	}
	return out
}

// needsResources reports whether a slot of r needs resources.
func needsResources(r fsm.ReadyRegion) bool {
	for i := range r.Keys {
		if !r.Keys[i].Resources.IsZero() {
			return true
		}
	}
	return false
}

// taken is one step of a region's placement, undone if the region does
// not fit after all: the slot at taken for key, or res charged to at's
// executor.
type taken struct {
	key     key
	at      ref
	charged bool
	res     jobspec.Resources
}

// freeHeap orders executors by free slots, most first (pack: fewest
// first), ties by id.
type freeHeap struct {
	pack  bool // fewest free first
	items []*freeExec
	free  int
	// all is every executor, byID the same by id (made when first needed:
	// only resources and undoing need it).
	all  []*freeExec
	byID map[string]*freeExec
}

type freeExec struct {
	id string
	// free is how many free slots it has; slots lists their numbers,
	// ascending, once listed (numbered: made when first taken from).
	exec     *Executor
	free     int
	slots    []int
	numbered bool
	// res is what it has free for resources.
	res jobspec.Resources
	idx int // its position in the heap, -1 while it has no free slot
}

// freeCount is how many slots Plan may place on e: its count less those in
// use (Used lists distinct numbers), whatever their numbers.
func freeCount(e Executor) int { return max(0, e.Slots-len(e.Used)) }

// freeSlotNumbers lists the free slot numbers of executor e in order: the
// slots below its count that are not in use, as many as freeCount.
func freeSlotNumbers(e Executor) []int {
	room := freeCount(e)
	if room == 0 {
		return nil
	}
	used := make(map[int]bool, len(e.Used))
	for _, u := range e.Used {
		used[u] = true
	}
	out := make([]int, 0, room)
	for s := 0; s < e.Slots && len(out) < room; s++ {
		if !used[s] {
			out = append(out, s)
		}
	}
	return out
}

// FreeSlots is the number of slots Plan may place on, over executors. It
// costs a step per executor, not per slot.
func FreeSlots(executors []Executor) int {
	n := 0
	for _, e := range executors {
		n += freeCount(e)
	}
	return n
}

// newFreeHeap orders the executors by their free slots. It counts them
// and lists no slot number: an executor's free numbers are listed when
// Plan first takes one of them (a pass that places a few regions on a
// fleet of thousands of slots lists the few executors it uses).
func newFreeHeap(executors []Executor, pack bool) *freeHeap {
	h := &freeHeap{pack: pack, all: make([]*freeExec, 0, len(executors))}
	for i := range executors {
		e := &executors[i]
		fe := &freeExec{id: e.ID, exec: e, free: freeCount(*e), idx: -1, res: jobspec.Resources{CPUMillis: e.Capacity.CPUMillis - e.InUse.CPUMillis,
			MemoryMB: e.Capacity.MemoryMB - e.InUse.MemoryMB}}
		h.all = append(h.all, fe)
		if fe.free > 0 {
			fe.idx = len(h.items)
			h.items = append(h.items, fe)
			h.free += fe.free
		}
	}
	heap.Init(h)
	return h
}

// lookup returns the executor with the given id, nil if it takes no work.
func (h *freeHeap) lookup(id string) *freeExec {
	if h.byID == nil {
		h.byID = make(map[string]*freeExec, len(h.all))
		for _, fe := range h.all {
			h.byID[fe.id] = fe
		}
	}
	return h.byID[id]
}

// number lists fe's free slot numbers, once.
func (fe *freeExec) number() {
	if !fe.numbered {
		fe.slots, fe.numbered = freeSlotNumbers(*fe.exec), true
	}
}

// takeFrom hands out the lowest free slot of fe, which has one.
func (h *freeHeap) takeFrom(fe *freeExec) ref {
	fe.number()
	r := ref{fe.id, fe.slots[0]}
	fe.slots = fe.slots[1:]
	fe.free--
	h.free--
	if fe.free == 0 {
		heap.Remove(h, fe.idx)
	} else {
		heap.Fix(h, fe.idx)
	}
	return r
}

// fitting is the executor with a free slot and res free that comes first
// (most free slots, or with pack fewest; ties by id), nil if none.
func (h *freeHeap) fitting(res jobspec.Resources) *freeExec {
	var best *freeExec
	for _, fe := range h.items {
		if !res.Fits(fe.res) {
			continue
		}
		if best == nil || h.before(fe, best) {
			best = fe
		}
	}
	return best
}

// charge takes res from what executor id has free, and reports whether it
// had them. An executor that takes no work (a slot held there) is not
// counted.
func (h *freeHeap) charge(id string, res jobspec.Resources) bool {
	fe := h.lookup(id)
	if fe == nil {
		return true
	}
	if !res.Fits(fe.res) {
		return false
	}
	fe.res = jobspec.Resources{CPUMillis: fe.res.CPUMillis - res.CPUMillis, MemoryMB: fe.res.MemoryMB - res.MemoryMB}
	return true
}

// undo gives back what a region that did not fit took, last first.
func (h *freeHeap) undo(steps []taken, held map[key]ref) {
	for i := len(steps) - 1; i >= 0; i-- {
		st := steps[i]
		fe := h.lookup(st.at.executor)
		if st.charged {
			if fe != nil {
				fe.res = fe.res.Add(st.res)
			}
			continue
		}
		delete(held, st.key)
		fe.number()
		at := 0
		for at < len(fe.slots) && fe.slots[at] < st.at.slot {
			at++
		}
		fe.slots = append(fe.slots, 0)
		copy(fe.slots[at+1:], fe.slots[at:])
		fe.slots[at] = st.at.slot
		fe.free++
		h.free++
		if fe.idx < 0 {
			heap.Push(h, fe)
		} else {
			heap.Fix(h, fe.idx)
		}
	}
}

func (h *freeHeap) Len() int           { return len(h.items) }
func (h *freeHeap) Less(i, j int) bool { return h.before(h.items[i], h.items[j]) }

// before is whether a new slot goes to a rather than b.
func (h *freeHeap) before(a, b *freeExec) bool {
	if a.free != b.free {
		return a.free > b.free != h.pack
	}
	return a.id < b.id
}
func (h *freeHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].idx, h.items[j].idx = i, j
}
func (h *freeHeap) Push(x any) {
	fe := x.(*freeExec)
	fe.idx = len(h.items)
	h.items = append(h.items, fe)
}
func (h *freeHeap) Pop() any {
	old := h.items
	x := old[len(old)-1]
	h.items = old[:len(old)-1]
	x.idx = -1
	return x
}

// Command turns a placement into the command to propose.
func (p Placement) Command(token uint64, now int64) *fsm.PlaceRegion {
	return &fsm.PlaceRegion{Fenced: fsm.Fenced{Token: token, Time: now}, Job: p.Job, Region: p.Region, Slots: p.Slots}
}
