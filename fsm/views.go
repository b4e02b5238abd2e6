package fsm

import (
	"slices"
	"sort"
	"strings"

	"jobmaster/jobspec"
	"jobmaster/wire"
)

// Views are copies: a caller may keep them while the state moves on.

// JobSummary is one line of the job list.
type JobSummary struct {
	ID     string
	Name   string
	Status JobStatus
	// SubmitTime and EndTime are unix ms (EndTime 0: not ended).
	SubmitTime, EndTime int64
}

// Jobs lists every job in id order.
func (s *State) Jobs() []JobSummary {
	out := make([]JobSummary, 0, len(s.jobs))
	for _, id := range sortedKeys(s.jobs) {
		j := s.jobs[id]
		out = append(out, JobSummary{ID: j.ID, Name: j.Spec.Name, Status: j.Status,
			SubmitTime: j.SubmitTime, EndTime: j.EndTime})
	}
	return out
}

// PartitionsHeld counts the partitions tracked on each executor that
// holds any, without listing them.
func (s *State) PartitionsHeld() map[string]int {
	out := make(map[string]int, len(s.partsOn))
	for e, m := range s.partsOn {
		if len(m) > 0 {
			out[e] = len(m)
		}
	}
	return out
}

// EndedBefore lists the ended jobs whose end time is before t (unix ms),
// oldest first, at most limit of them.
func (s *State) EndedBefore(t int64, limit int) []string {
	var out []string
	for _, id := range sortedKeys(s.jobs) {
		if j := s.jobs[id]; j.Status.Terminal() && j.EndTime < t {
			out = append(out, id)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return s.jobs[out[a]].EndTime < s.jobs[out[b]].EndTime })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// OldestTombstone is when the longest-forgotten job was forgotten (unix
// ms), or 0 when there is no tombstone.
func (s *State) OldestTombstone() int64 {
	var oldest int64
	for _, t := range s.forgotten {
		if oldest == 0 || t.At < oldest {
			oldest = t.At
		}
	}
	return oldest
}

// JobView is a job with the current attempt of each subtask.
type JobView struct {
	ID       string
	Name     string
	Status   JobStatus
	Message  string
	Restarts int
	// UncountedRestarts: Job.UncountedRestarts.
	UncountedRestarts int
	SubmitIndex       uint64
	SubmitTime        int64
	EndTime           int64
	Spec              *jobspec.Spec
	Vertices          []VertexView
	// WaitingSlots is the most new slots that a region of the job ready
	// to run (its upstream regions finished), and not placed yet, needs
	// at once (newSlots); 0 when none waits, or one that re-runs some of
	// its subtasks only does.
	WaitingSlots int
	// WaitingForDrain names a draining executor where a slot that a ready
	// region would join is held (the smallest id of them): the region
	// waits until the job's tasks there end, at the drain's deadline at the
	// latest ("": none).
	WaitingForDrain string
	// WaitingForDrainDeadline is that drain's deadline (unix ms): when
	// the job's tasks there are moved at the latest.
	WaitingForDrainDeadline int64
}

// VertexView is one vertex of a JobView.
type VertexView struct {
	ID          string
	Parallelism int
	Subtasks    []Execution
	// Previous is how the attempt before each subtask's current one ended,
	// by subtask index (nil: none restarted).
	Previous []PreviousAttempt
}

// JobReadCost is what an answer to a read of job id costs, in subtasks of
// about readUnit bytes: one per subtask, and one more per readUnit bytes
// of the messages its subtasks' current and previous attempts carry
// (escaped in JSON, a message may take six times its bytes).
func (s *State) JobReadCost(id string) int {
	j, ok := s.jobs[id]
	if !ok {
		return 0
	}
	bytes := 0
	for _, subs := range s.current[id] {
		for _, e := range subs {
			if e != nil {
				bytes += len(e.Message)
			}
		}
	}
	for vi := range j.Vertices {
		for _, p := range j.Vertices[vi].Previous {
			bytes += len(p.Message)
		}
	}
	return j.Spec.TotalSubtasks() + 6*bytes/readUnit
}

// JobMessage is job id's message (why it failed, or what it last
// restarted for); "" for a job it does not hold.
func (s *State) JobMessage(id string) string {
	if j, ok := s.jobs[id]; ok {
		return j.Message
	}
	return ""
}

// readUnit is the bytes of a subtask in a job's answer without messages.
const readUnit = 600

// Job returns a view of one job.
func (s *State) Job(id string) (*JobView, bool) {
	j, ok := s.jobs[id]
	if !ok {
		return nil, false
	}
	v := &JobView{
		ID: j.ID, Name: j.Spec.Name, Status: j.Status, Message: j.Message, Restarts: j.Restarts, UncountedRestarts: j.UncountedRestarts,
		SubmitIndex: j.SubmitIndex, SubmitTime: j.SubmitTime, EndTime: j.EndTime, Spec: j.Spec,
	}
	for vi := range j.Vertices {
		sv := &j.Spec.Vertices[vi]
		vv := VertexView{ID: sv.ID, Parallelism: sv.Parallelism, Subtasks: make([]Execution, 0, sv.Parallelism),
			Previous: append([]PreviousAttempt(nil), j.Vertices[vi].Previous...)}
		s.forEachInVertex(j, vi, func(e *Execution) { vv.Subtasks = append(vv.Subtasks, *e) })
		v.Vertices = append(v.Vertices, vv)
	}
	for ri := range j.Regions {
		if j.Regions[ri].Status == RegionReady {
			ref := regionRef{job: j.ID, region: ri}
			v.WaitingSlots = max(v.WaitingSlots, s.newSlots(ref))
			if d := s.drainHolds(ref); d != "" && (v.WaitingForDrain == "" || d < v.WaitingForDrain) {
				v.WaitingForDrain, v.WaitingForDrainDeadline = d, s.drains[d].Deadline
			}
		}
	}
	return v, true
}

// Execution returns a copy of one execution.
func (s *State) Execution(id string) (Execution, bool) {
	e, ok := s.execs[id]
	if !ok {
		return Execution{}, false
	}
	return *e, true
}

// SubtaskAttempts is what the state knows of one subtask's attempts: the
// current one and the one before it, the only two whose executors it
// keeps, with the job's vertex ids and the vertex's parallelism, for
// answers that name what there is.
type SubtaskAttempts struct {
	// Vertices are the job's vertex ids (nil: no such job); Parallelism
	// is the vertex's (0: no such vertex).
	Vertices    []string
	Parallelism int
	// Current is the subtask's current attempt, when HasCurrent.
	Current    Execution
	HasCurrent bool
	// Previous is how the attempt before the current one ended, and where
	// it ran; its State is "" while the subtask is at its first attempt.
	Previous PreviousAttempt
}

// AttemptsOf is what the state knows of the attempts of subtask i of
// vertex of job. It costs the job's vertices, not its subtasks.
func (s *State) AttemptsOf(job, vertex string, i int) SubtaskAttempts {
	var a SubtaskAttempts
	j := s.jobs[job]
	if j == nil {
		return a
	}
	vi := -1
	for k := range j.Spec.Vertices {
		a.Vertices = append(a.Vertices, j.Spec.Vertices[k].ID)
		if j.Spec.Vertices[k].ID == vertex {
			vi = k
		}
	}
	if vi < 0 {
		return a
	}
	a.Parallelism = j.Spec.Vertices[vi].Parallelism
	if i < 0 || i >= a.Parallelism {
		return a
	}
	if c := s.current[job]; c != nil && c[vi][i] != nil {
		a.Current, a.HasCurrent = *c[vi][i], true
	}
	if p := j.Vertices[vi].Previous; i < len(p) {
		a.Previous = p[i]
	}
	return a
}

// NumJobs and NumExecutions count what the state holds.
func (s *State) NumJobs() int { return len(s.jobs) }

// HasJob reports whether a job with this id exists.
func (s *State) HasJob(id string) bool { _, ok := s.jobs[id]; return ok }
func (s *State) NumExecutions() int    { return len(s.execs) }

// SpecBytes is the sum of the footprints of the jobs' specs
// (jobspec.Spec.Footprint): what the leader's --max-spec-bytes counts.
func (s *State) SpecBytes() int64 { return s.specBytes }

// Expected returns the live executions placed on an executor (the
// expected-deployment set for it), in id order.
func (s *State) Expected(executor string) []Execution {
	m := s.byExecutor[executor]
	// Sorted as pointers, then copied: an execution is 184 bytes with
	// pointers, which a sort of the copies would move under the write
	// barrier, at every full report of every executor.
	ptrs := make([]*Execution, 0, len(m))
	for e := range m {
		ptrs = append(ptrs, e)
	}
	slices.SortFunc(ptrs, func(a, b *Execution) int { return strings.Compare(a.ID, b.ID) })
	out := make([]Execution, len(ptrs))
	for i, e := range ptrs {
		out[i] = *e
	}
	return out
}

// ExpectedAmong returns those of ids that are live executions placed on
// the executor, in the order of ids: the part of the expected set a partial
// report (which lists only what changed) is reconciled against.
func (s *State) ExpectedAmong(executor string, ids []string) []Execution {
	m := s.byExecutor[executor]
	out := make([]Execution, 0, len(ids))
	for _, id := range ids {
		if e := s.execs[id]; e != nil {
			if _, ok := m[e]; ok {
				out = append(out, *e)
			}
		}
	}
	return out
}

// ExpectedEach calls f with every live execution placed on the executor,
// without copying; f must not keep the pointer.
func (s *State) ExpectedEach(executor string, f func(*Execution)) {
	for e := range s.byExecutor[executor] {
		f(e)
	}
}

// Canceling returns, per executor, the executions being cancelled there.
func (s *State) Canceling() map[string][]string {
	out := make(map[string][]string, len(s.canceling))
	for ex, m := range s.canceling {
		out[ex] = sortedKeys(m)
	}
	return out
}

// ExecutorsWithWork lists the executors that have live executions or hold
// tracked partitions, in order: the leader keeps track of them, and
// declares them lost when they stop answering.
func (s *State) ExecutorsWithWork() []string {
	if len(s.partsOn) == 0 {
		return sortedKeys(s.byExecutor)
	}
	ids := make(map[string]bool, len(s.byExecutor)+len(s.partsOn))
	for id := range s.byExecutor {
		ids[id] = true
	}
	for id := range s.partsOn {
		ids[id] = true
	}
	return sortedKeys(ids)
}

// UsedSlots returns, per executor, the numbers of the slots in use.
func (s *State) UsedSlots() map[string][]int {
	out := make(map[string][]int, len(s.slots))
	for ex, m := range s.slots {
		l := make([]int, 0, len(m))
		for n := range m {
			l = append(l, n)
		}
		sort.Ints(l)
		out[ex] = l
	}
	return out
}

// AppendUsedSlots appends the numbers of executor ex's slots in use to
// dst, in no order: what a scheduling pass reads per executor, without
// the map and sorting UsedSlots makes.
func (s *State) AppendUsedSlots(dst []int, ex string) []int {
	for n := range s.slots[ex] {
		dst = append(dst, n)
	}
	return dst
}

// ResourcesInUse returns, per executor, the resources its live executions
// need together (executors whose executions need none are left out).
func (s *State) ResourcesInUse() map[string]jobspec.Resources {
	out := make(map[string]jobspec.Resources)
	for ex, m := range s.byExecutor {
		var sum jobspec.Resources
		for e := range m {
			if j := s.jobs[e.Job]; j != nil {
				if r := j.Spec.Vertices[e.VertexIndex].Resources; r != nil {
					sum = sum.Add(*r)
				}
			}
		}
		if !sum.IsZero() {
			out[ex] = sum
		}
	}
	return out
}

// SlotsInUse returns, per executor, how many of its slots are in use.
func (s *State) SlotsInUse() map[string]int {
	out := make(map[string]int, len(s.slots))
	for ex, m := range s.slots {
		out[ex] = len(m)
	}
	return out
}

// ReadyRegion is a region waiting to be placed.
type ReadyRegion struct {
	Job         string
	Region      int
	SubmitIndex uint64
	// Keys are the slot keys the region needs, in group then index order.
	Keys []SlotNeed
	// Executions is the number of executions the region will start.
	Executions int
}

// SlotNeed is one slot key of a ready region. Held is set when a live
// execution of the same job already holds the key's slot: the region joins it
// there.
type SlotNeed struct {
	Group    string
	Index    int
	Held     bool
	Executor string
	Slot     int
	// Resources is what the region's executions in the slot need of its
	// executor together (zero if their vertices declare none).
	Resources jobspec.Resources
}

// ReadyRegions lists the regions waiting for placement, oldest job first.
func (s *State) ReadyRegions() []ReadyRegion {
	ready, _ := s.ReadyRegionsWithin(-1)
	return ready
}

// ReadyRegionsWithin lists, oldest job first, the regions waiting for
// placement that a scheduling pass with free new slots could place (every
// one when free < 0). It leaves out, without listing their keys:
//   - a whole region (one none of whose subtasks re-runs alone) that needs
//     more slot keys than free plus every slot its job holds, found from
//     its vertices' parallelism: a region too big for the slots there are
//     would otherwise have its keys listed at every pass while it waits (a
//     thousand waiting regions of a hundred subtasks each made each pass a
//     hundred thousand steps under the state's lock);
//   - a region of a job none of whose regions is listed that needs more
//     than the free slots left by the regions before it that surely take
//     some;
//   - every region after those that surely take all the free slots, or
//     after maxSkipped regions in a row left out as the second kind: a
//     pass placing a few regions of a queue of thousands listed them all
//     (18,000 queued jobs of ten subtasks made every pass 0.2 s under the
//     lock), and now reads the few from the ready queue's top. Past that
//     cut it still lists the rest of the regions of the job last listed
//     (a job's regions are next to each other in the queue, and may share
//     the slots placed for it), and the regions that may need no new
//     slot (they share slots their job holds: leastNewSlots 0, a lower
//     bound), found from the jobs that hold slots and have regions queued
//     (sharingHeldSlots).
//
// A region surely takes its keys' slots when none of its keys is held
// (nothing can keep it off a draining executor), none declares resources
// (any free slot fits it), its job's regions listed before it surely take
// theirs (it takes the keys they did not), and the slots those before it
// surely take leave enough (surely.takes). A placement that walks the
// list in order (placement.Plan) and places what fits then places what it
// would have placed from the whole queue, given free is exactly the free
// slots it places on, unless a region that did not surely take slots took
// some: then a region left out waits a pass while that one was placed.
//
// With free 0 it lists only the regions that may need no new slot, and
// does not walk the queue.
//
// tooBig lists the regions of the first kind met before the cut, with
// their job, region and submit index only.
func (s *State) ReadyRegionsWithin(free int) (ready, tooBig []ReadyRegion) {
	sure := 0                      // the new slots the regions listed surely take
	skipped := 0                   // the regions left out since the last listed
	listed := map[string]*surely{} // the jobs with a region listed
	if free == 0 {
		// Without a free slot only the regions that need none can be
		// placed: the queue is not walked.
		return s.sharingHeldSlots(nil, listed), nil
	}
	s.ready.inOrder(func(it readyItem) bool {
		l := listed[it.ref.job]
		if free >= 0 {
			// A job's regions are next to each other in the queue: the
			// rest of a job listed may share the slots placed for it.
			if (sure >= free || skipped >= maxSkipped) && l == nil {
				return false
			}
			least := s.leastNewSlots(it.ref)
			if least > free {
				// Not counted in skipped: a small region after a
				// thousand too big for every free slot is still reached.
				tooBig = append(tooBig, ReadyRegion{Job: it.ref.job, Region: it.ref.region, SubmitIndex: it.submit})
				return true
			}
			if least > free-sure && l == nil {
				skipped++
				return true
			}
			skipped = 0
		}
		rr := s.readyRegion(it.ref)
		if free >= 0 {
			if l == nil {
				l = &surely{all: true}
				listed[it.ref.job] = l
			}
			sure += l.takes(&rr, free-sure)
		}
		ready = append(ready, rr)
		return true
	})
	if free < 0 {
		return ready, tooBig
	}
	return s.sharingHeldSlots(ready, listed), tooBig
}

// sharingHeldSlots appends to ready, in queue order, the regions waiting
// that may need no new slot (they share slots their job holds, by
// leastNewSlots, a lower bound) of the jobs not in listed: after a pass's
// cut they take nothing from the others, and are listed wherever they
// stand in the queue. They are found from the jobs that hold slots and
// have regions queued (joinable), not from either alone: a full cluster
// with thousands running and thousands queued looks at the few it can
// join.
func (s *State) sharingHeldSlots(ready []ReadyRegion, listed map[string]*surely) []ReadyRegion {
	var more []readyItem
	look := func(job string) {
		if listed[job] != nil {
			return
		}
		j := s.jobs[job]
		for ri := range j.Regions {
			ref := regionRef{job, ri}
			if s.ready.has(ref) && s.leastNewSlots(ref) == 0 {
				more = append(more, readyItem{ref, j.SubmitIndex})
			}
		}
	}
	for job := range s.joinable {
		look(job)
	}
	slices.SortFunc(more, readyItem.compare)
	for _, it := range more {
		ready = append(ready, s.readyRegion(it.ref))
	}
	return ready
}

// surely is what the regions of one job listed by a scheduling pass
// surely take (ReadyRegionsWithin): whether all of them surely take their
// slots, and then the slot keys they take: the first region's (its keys
// are distinct), gathered in keys only once a second one comes.
type surely struct {
	all   bool
	first []SlotNeed
	keys  map[groupIndex]bool
}

type groupIndex struct {
	group string
	index int
}

// takes is the number of new slots region r, listed after l's, surely
// takes with left slots free, or 0 when it does not surely take them: it
// does when the job's regions before it all do, none of its keys is held
// (nothing can keep it off a draining executor) or declares resources
// (any free slot fits it), and the keys not placed for those before it
// are at most left.
func (l *surely) takes(r *ReadyRegion, left int) int {
	if !l.all {
		return 0
	}
	if l.first != nil && l.keys == nil {
		l.keys = make(map[groupIndex]bool, len(l.first)+len(r.Keys))
		for _, k := range l.first {
			l.keys[groupIndex{k.Group, k.Index}] = true
		}
	}
	n := 0
	for i := range r.Keys {
		k := &r.Keys[i]
		if k.Held || !k.Resources.IsZero() {
			l.all = false
			return 0
		}
		if !l.keys[groupIndex{k.Group, k.Index}] {
			n++
		}
	}
	if n > left {
		l.all = false
		return 0
	}
	if l.first == nil {
		l.first = r.Keys
		return n
	}
	for i := range r.Keys {
		l.keys[groupIndex{r.Keys[i].Group, r.Keys[i].Index}] = true
	}
	return n
}

// maxSkipped bounds the regions a scheduling pass passes over in a row
// (ReadyRegionsWithin): those further down the queue wait for the ones
// before them to be placed.
const maxSkipped = 1000

// leastNewSlots is at most the number of new slots ready region r needs:
// for a whole region (every subtask of it waits), the sum over its slot
// sharing groups of the group's keys (its largest parallelism among the
// region's vertices) less the slots the job holds in that group; 0 for a
// region that re-runs some subtasks only.
func (s *State) leastNewSlots(r regionRef) int {
	held := s.slotOf[r.job]
	if held == nil {
		// The job holds no slot (as every job in a queue): its region's
		// keys, counted without a map when its vertices share a group.
		return s.wholeRegionKeys(r)
	}
	widest, whole := s.regionKeys(r)
	if !whole {
		return 0
	}
	need := 0
	for group, keys := range widest { // a sum: the map's order does not matter
		if g := held[group]; g != nil {
			keys -= g.held
		}
		need += max(0, keys)
	}
	return need
}

// wholeRegionKeys is the number of slot keys of region r (over its slot
// sharing groups, each its largest parallelism among the region's
// vertices) when every subtask of it waits, else 0.
func (s *State) wholeRegionKeys(r regionRef) int {
	j := s.jobs[r.job]
	vs := j.Regions[r.region].Vertices
	group := j.Spec.Vertices[vs[0]].SlotSharingGroup
	subtasks, widest := 0, 0
	for _, vi := range vs {
		v := &j.Spec.Vertices[vi]
		if v.SlotSharingGroup != group {
			widest, whole := s.regionKeys(r)
			if !whole {
				return 0
			}
			n := 0
			for _, keys := range widest { // a sum: the map's order does not matter
				n += keys
			}
			return n
		}
		subtasks += v.Parallelism
		widest = max(widest, v.Parallelism)
	}
	if s.live[r] != subtasks {
		return 0
	}
	return widest
}

// regionKeys is the number of slot keys of each slot sharing group of
// region r (the group's largest parallelism among the region's vertices),
// and whether every subtask of it waits (a whole region, not a re-run of
// some).
func (s *State) regionKeys(r regionRef) (widest map[string]int, whole bool) {
	j := s.jobs[r.job]
	subtasks := 0
	widest = make(map[string]int, 1)
	for _, vi := range j.Regions[r.region].Vertices {
		v := &j.Spec.Vertices[vi]
		subtasks += v.Parallelism
		widest[v.SlotSharingGroup] = max(widest[v.SlotSharingGroup], v.Parallelism)
	}
	return widest, s.live[r] == subtasks
}

// newSlots is the number of new slots ready region r needs, exactly: for
// a whole region, the slot keys of its groups (indexes below the group's
// widest parallelism in the region) that no live execution of the job
// holds; 0 for a region that re-runs some subtasks only. (leastNewSlots,
// the scheduler's cheap bound, counts every held slot of a group, at any
// index.)
func (s *State) newSlots(r regionRef) int {
	widest, whole := s.regionKeys(r)
	if !whole {
		return 0
	}
	need := 0
	for group, keys := range widest { // a sum: the map's order does not matter
		g := s.slotOf[r.job][group]
		for i := range keys {
			if g == nil || i >= len(g.refs) || g.refs[i].executor == "" {
				need++
			}
		}
	}
	return need
}

// drainHolds names the draining executor (the smallest id) where a slot
// that ready region r would join is held, "" if none is: a draining
// executor gets no new work, so the region waits (the leader's
// onTakers reads the same keys).
func (s *State) drainHolds(r regionRef) string {
	if len(s.drains) == 0 {
		return ""
	}
	found := ""
	for _, k := range s.readyRegion(r).Keys {
		if k.Held && s.drains[k.Executor] != nil && (found == "" || k.Executor < found) {
			found = k.Executor
		}
	}
	return found
}

// HasReady reports whether any region waits to be placed.
func (s *State) HasReady() bool { return s.ready.Len() > 0 }

func (s *State) readyRegion(r regionRef) ReadyRegion {
	j := s.jobs[r.job]
	rr := ReadyRegion{Job: r.job, Region: r.region, SubmitIndex: j.SubmitIndex}
	type gi struct {
		group string
		index int
	}
	seen := make(map[gi]int)
	cur := s.current[j.ID]
	for _, vi := range j.Regions[r.region].Vertices {
		v := &j.Spec.Vertices[vi]
		res := v.Of()
		for i := 0; i < v.Parallelism; i++ {
			// A region that re-runs some subtasks keeps the others'
			// FINISHED attempts: only the SCHEDULED ones need a slot.
			if e := cur[vi][i]; e == nil || e.State != wire.StateScheduled {
				continue
			}
			rr.Executions++
			k := gi{v.SlotSharingGroup, i}
			if at, ok := seen[k]; ok {
				if !res.IsZero() {
					rr.Keys[at].Resources = rr.Keys[at].Resources.Add(res)
				}
				continue
			}
			seen[k] = len(rr.Keys)
			n := SlotNeed{Group: k.group, Index: i, Resources: res}
			if ref, ok := s.slotOf.get(slotKey{j.ID, k.group, i}); ok {
				n.Held, n.Executor, n.Slot = true, ref.executor, ref.slot
			}
			rr.Keys = append(rr.Keys, n)
		}
	}
	sort.Slice(rr.Keys, func(a, b int) bool {
		if rr.Keys[a].Group != rr.Keys[b].Group {
			return rr.Keys[a].Group < rr.Keys[b].Group
		}
		return rr.Keys[a].Index < rr.Keys[b].Index
	})
	return rr
}

// RestartsDue lists the jobs with a region whose restart is due at now.
func (s *State) RestartsDue(now int64) []string {
	due := make(map[string]bool)
	for r := range s.restarting {
		if !due[r.job] && s.restartDue(s.jobs[r.job], r.region, now) {
			due[r.job] = true
		}
	}
	return sortedKeys(due)
}

// LastFailure returns the time of the job's latest failure event (unix
// ms), 0 if it has none or is unknown.
func (s *State) LastFailure(job string) int64 {
	if j, ok := s.jobs[job]; ok {
		return j.Backoff.LastFailure
	}
	return 0
}

// NextRestart returns the earliest restart time of any restarting region,
// or 0 when none is restarting.
func (s *State) NextRestart() int64 {
	var next int64
	for r := range s.restarting {
		at := s.jobs[r.job].Regions[r.region].RestartAt
		if next == 0 || at < next {
			next = at
		}
	}
	return next
}

// TaskSpec is what an executor needs to run an execution: with data
// edges, the consumers it writes for and the producer attempts it reads (the
// sources' executors; their addresses are the leader's to fill in).
type TaskSpec struct {
	Execution   Execution
	Parallelism int
	Command     []string
	Env         map[string]string
	Outputs     []wire.Output
	Inputs      []wire.Input
	Resources   wire.Resources
}

// TaskSpec returns the deployment of a placed execution (false if the
// state holds no such execution, or its job is gone).
func (s *State) TaskSpec(id string) (ts TaskSpec, ok bool) {
	s.EachTaskSpecOf([]string{id}, func(one *TaskSpec) { ts, ok = *one, true })
	return ts, ok
}

// EachTaskSpecOf is EachTaskSpec for the executions named by ids (those
// the state does not hold are skipped): a redeploy of many tasks shares
// their vertices' edges as a placement's does.
func (s *State) EachTaskSpecOf(ids []string, fn func(ts *TaskSpec)) {
	placed := make([]Execution, 0, len(ids))
	for _, id := range ids {
		if e, ok := s.execs[id]; ok {
			placed = append(placed, *e)
		}
	}
	s.EachTaskSpec(placed, func(_ int, ts *TaskSpec) { fn(ts) })
}

// TaskSpecs returns the deployments of placed executions (Placed of a
// place-region result). The executions of one vertex share its outputs and
// inputs (read them, do not change them).
func (s *State) TaskSpecs(placed []Execution) []TaskSpec {
	out := make([]TaskSpec, 0, len(placed))
	s.EachTaskSpec(placed, func(_ int, ts *TaskSpec) { out = append(out, *ts) })
	return out
}

// EachTaskSpec calls fn with the deployment of each placed execution (its
// index in placed, and the deployment, valid during the call), in order;
// an execution whose job is gone is skipped.
func (s *State) EachTaskSpec(placed []Execution, fn func(i int, ts *TaskSpec)) {
	type edges struct {
		outputs []wire.Output
		inputs  []wire.Input
	}
	type vertex struct {
		job string
		vi  int
	}
	memo := make(map[vertex]edges)
	graphs := make(map[string]*edgeIndex) // per job
	var ts TaskSpec
	for i := range placed {
		j := s.jobs[placed[i].Job]
		if j == nil {
			continue
		}
		vi := placed[i].VertexIndex
		v := &j.Spec.Vertices[vi]
		ed, ok := memo[vertex{j.ID, vi}]
		if !ok {
			x := graphs[j.ID]
			if x == nil {
				x = newEdgeIndex(j.Spec)
				graphs[j.ID] = x
			}
			ed.outputs, ed.inputs = s.dataEdges(j, vi, x)
			memo[vertex{j.ID, vi}] = ed
		}
		ts = TaskSpec{Execution: placed[i], Parallelism: v.Parallelism, Command: v.Command, Env: v.Env,
			Outputs: ed.outputs, Inputs: ed.inputs, Resources: wireResources(v)}
		fn(i, &ts)
	}
}

// wireResources is what v's tasks declared, as deployed.
func wireResources(v *jobspec.Vertex) wire.Resources {
	r := v.Of()
	return wire.Resources{CPUMillis: r.CPUMillis, MemoryMB: r.MemoryMB}
}
