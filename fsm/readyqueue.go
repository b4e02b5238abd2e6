package fsm

import (
	"cmp"
	"container/heap"
)

// readyQueue indexes the regions waiting for placement in the order a
// scheduling pass takes them: oldest job first (by submit index, then job
// id: a batch of submissions shares one index), then by region. It is a
// binary heap, kept as regions become ready and stop being so, which a
// pass reads in order from its top without changing it (inOrder): a pass
// that places a few regions of a queue of thousands reads those few and
// their neighbours, where sorting the whole queue at every pass cost it
// the queue's length. A derived index: rebuilt on restore, not hashed.
type readyQueue struct {
	items []readyItem
	pos   map[regionRef]int
	// jobs counts the regions queued per job.
	jobs map[string]int
}

type readyItem struct {
	ref    regionRef
	submit uint64
}

func newReadyQueue() readyQueue {
	return readyQueue{pos: make(map[regionRef]int), jobs: make(map[string]int)}
}

func (a readyItem) compare(b readyItem) int {
	if c := cmp.Compare(a.submit, b.submit); c != 0 {
		return c
	}
	if c := cmp.Compare(a.ref.job, b.ref.job); c != 0 {
		return c
	}
	return cmp.Compare(a.ref.region, b.ref.region)
}

func (q *readyQueue) Len() int           { return len(q.items) }
func (q *readyQueue) Less(i, j int) bool { return q.items[i].compare(q.items[j]) < 0 }
func (q *readyQueue) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.pos[q.items[i].ref] = i
	q.pos[q.items[j].ref] = j
}
func (q *readyQueue) Push(x any) {
	it := x.(readyItem)
	q.pos[it.ref] = len(q.items)
	q.items = append(q.items, it)
	q.jobs[it.ref.job]++
}
func (q *readyQueue) Pop() any {
	it := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	delete(q.pos, it.ref)
	if q.jobs[it.ref.job]--; q.jobs[it.ref.job] == 0 {
		delete(q.jobs, it.ref.job)
	}
	return it
}

// add puts region r of a job submitted at index submit in the queue.
func (q *readyQueue) add(r regionRef, submit uint64) {
	if _, ok := q.pos[r]; !ok {
		heap.Push(q, readyItem{r, submit})
	}
}

// remove takes region r out of the queue.
func (q *readyQueue) remove(r regionRef) {
	if i, ok := q.pos[r]; ok {
		heap.Remove(q, i)
	}
}

func (q *readyQueue) has(r regionRef) bool { _, ok := q.pos[r]; return ok }

// inOrder yields the queue's regions in order until yield returns false,
// without changing the queue (safe under the state's read lock): the
// positions whose parents were yielded wait in a heap of their own, and
// each step yields the least of them. Reading k regions costs about
// k log k.
func (q *readyQueue) inOrder(yield func(readyItem) bool) {
	if len(q.items) == 0 {
		return
	}
	front := []int{0}
	less := func(a, b int) bool { return q.Less(front[a], front[b]) }
	for len(front) > 0 {
		i := front[0]
		// Pop: the last goes to the top and sifts down.
		front[0] = front[len(front)-1]
		front = front[:len(front)-1]
		for at := 0; ; {
			least, l, r := at, 2*at+1, 2*at+2
			if l < len(front) && less(l, least) {
				least = l
			}
			if r < len(front) && less(r, least) {
				least = r
			}
			if least == at {
				break
			}
			front[at], front[least] = front[least], front[at]
			at = least
		}
		if !yield(q.items[i]) {
			return
		}
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c >= len(q.items) {
				break
			}
			// Push: sift up.
			front = append(front, c)
			for at := len(front) - 1; at > 0; {
				parent := (at - 1) / 2
				if !less(at, parent) {
					break
				}
				front[at], front[parent] = front[parent], front[at]
				at = parent
			}
		}
	}
}
