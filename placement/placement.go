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
//     id), which spreads work across executors;
//   - regions are considered in the order given (oldest job first); one that
//     does not fit is skipped and later, smaller ones may still run.
package placement

import (
	"container/heap"

	"jobmaster/fsm"
)

// Executor is an executor that can take work.
type Executor struct {
	ID    string
	Slots int
	// Used are the slot numbers in use.
	Used []int
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

// Plan places as many of the regions as fit.
func Plan(regions []fsm.ReadyRegion, executors []Executor) []Placement {
	h := newFreeHeap(executors)
	held := make(map[key]ref)
	var out []Placement
	for _, r := range regions {
		need := 0
		for _, k := range r.Keys {
			if _, ok := held[key{r.Job, k.Group, k.Index}]; !k.Held && !ok {
				need++
			}
		}
		if need > h.free {
			continue
		}
		p := Placement{Job: r.Job, Region: r.Region, Executions: r.Executions, Slots: make([]fsm.SlotAssign, 0, len(r.Keys))}
		for _, k := range r.Keys {
			kk := key{r.Job, k.Group, k.Index}
			var at ref
			switch prev, ok := held[kk]; {
			case k.Held:
				at = ref{k.Executor, k.Slot}
			case ok:
				at = prev
			default:
				at = h.take()
				held[kk] = at
			}
			p.Slots = append(p.Slots, fsm.SlotAssign{Group: k.Group, Index: k.Index, Executor: at.executor, Slot: at.slot})
		}
		out = append(out, p)
	}
	return out
}

// freeHeap orders executors by free slots, most first, ties by id.
type freeHeap struct {
	items []*freeExec
	free  int
}

type freeExec struct {
	id    string
	slots []int // free slot numbers, ascending
}

func newFreeHeap(executors []Executor) *freeHeap {
	h := &freeHeap{}
	for _, e := range executors {
		used := make(map[int]bool, len(e.Used))
		for _, u := range e.Used {
			used[u] = true
		}
		fe := &freeExec{id: e.ID}
		for s := 0; s < e.Slots; s++ {
			if !used[s] {
				fe.slots = append(fe.slots, s)
			}
		}
		if len(fe.slots) > 0 {
			h.items = append(h.items, fe)
			h.free += len(fe.slots)
		}
	}
	heap.Init(h)
	return h
}

// take hands out the lowest free slot of the executor with the most free
// slots. The caller has checked that a slot is free.
func (h *freeHeap) take() ref {
	top := h.items[0]
	r := ref{top.id, top.slots[0]}
	top.slots = top.slots[1:]
	h.free--
	if len(top.slots) == 0 {
		heap.Pop(h)
	} else {
		heap.Fix(h, 0)
	}
	return r
}

func (h *freeHeap) Len() int { return len(h.items) }
func (h *freeHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if len(a.slots) != len(b.slots) {
		return len(a.slots) > len(b.slots)
	}
	return a.id < b.id
}
func (h *freeHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *freeHeap) Push(x any)    { h.items = append(h.items, x.(*freeExec)) }
func (h *freeHeap) Pop() any {
	old := h.items
	x := old[len(old)-1]
	h.items = old[:len(old)-1]
	return x
}

// Command turns a placement into the command to propose.
func (p Placement) Command(token uint64, now int64) *fsm.PlaceRegion {
	return &fsm.PlaceRegion{Fenced: fsm.Fenced{Token: token, Time: now}, Job: p.Job, Region: p.Region, Slots: p.Slots}
}
