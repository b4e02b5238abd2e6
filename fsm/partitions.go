package fsm

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"jobmaster/jobspec"
	"jobmaster/wire"
)

// Result partitions (docs/architecture.md, "Result partitions").
//
// A producer is a vertex with consumers. When the current attempt of a
// producer subtask FINISHED, its output is a partition: the state tracks it
// (producer execution, executor, bytes) and its executor keeps it until the
// state no longer tracks it.
//
// Release: a partition is needed while its job runs, it is the output of the
// current attempt of its subtask, and some consumer region (a region with a
// vertex that reads it) has not FINISHED. Once not needed it is dropped, and
// the leader has its executor delete it. A consumer region that FINISHED
// never reads again: only a full failover restarts a finished region, and
// that re-runs the producers too.
//
// Loss: a partition gone from its executor (the executor lost, its report
// lacking it, or a consumer unable to fetch it) is dropped; if it was
// needed and a consumer has yet to read it (readers.go: every consumer
// that runs has fetched its blocking inputs whole before it started), its
// producer runs again. That is one restart under the job's restart
// strategy however many partitions went together: the consumer regions
// with a reader yet to start restart (with what the failover scope adds),
// and the producer region re-runs only the lost subtasks when it is a
// single vertex (whose other subtasks' partitions are still there), or
// whole when it has several (a subtask inside reads its region's pipelined
// outputs, which are gone). A needed partition lost after every consumer
// read it costs nothing unless one of them restarts: what runs again, for
// any cause, reads its inputs again, and a producer subtask it reads whose
// output was released (its consumers had all finished) or lost runs again
// in the same restart (restartScope, readsReleased).

// consumersOf lists the edges to the vertices that read vertex vi, in
// index order (consumerTable has them for every vertex at once).
func consumersOf(spec *jobspec.Spec, vi int) []consumerEdge {
	var out []consumerEdge
	id := spec.Vertices[vi].ID
	for ci := range spec.Vertices {
		for _, in := range spec.Vertices[ci].Inputs {
			if in.From == id {
				out = append(out, consumerEdge{vertex: ci, forward: in.Forward()})
			}
		}
	}
	return out
}

// hasConsumers reports whether vertex vi of job j is read by another.
func hasConsumers(j *Job, vi int) bool {
	return len(consumersOf(j.Spec, vi)) > 0
}

// trackPartition records the partition of producer execution e, which
// FINISHED at log index index with bytes of output.
func (s *State) trackPartition(e *Execution, bytes int64, index uint64) {
	p := &Partition{ID: e.ID, Job: e.Job, VertexIndex: e.VertexIndex, Subtask: e.Subtask, Attempt: e.Attempt,
		Executor: e.Executor, Bytes: max(bytes, 0), Index: index}
	s.partitions[p.ID] = p
	s.indexPartition(p)
}

func (s *State) indexPartition(p *Partition) {
	m := s.partsOn[p.Executor]
	if m == nil {
		m = make(map[string]*Partition)
		s.partsOn[p.Executor] = m
	}
	m[p.ID] = p
}

// dropPartition stops tracking a partition (nil: nothing).
func (s *State) dropPartition(p *Partition) {
	if p == nil {
		return
	}
	delete(s.partitions, p.ID)
	if m := s.partsOn[p.Executor]; m != nil {
		delete(m, p.ID)
		if len(m) == 0 {
			delete(s.partsOn, p.Executor)
		}
	}
}

// partitionNeeded reports whether a consumer may still read partition p of
// job j (see the package comment on release); consumers are the edges to
// the vertices that read p's vertex.
func (s *State) partitionNeeded(j *Job, p *Partition, consumers []consumerEdge) bool {
	if j.Status.Terminal() || j.Status.ending() {
		return false
	}
	cur := s.current[j.ID]
	if p.VertexIndex >= len(cur) || p.Subtask >= len(cur[p.VertexIndex]) {
		return false
	}
	if e := cur[p.VertexIndex][p.Subtask]; e == nil || e.ID != p.ID {
		return false
	}
	for _, c := range consumers {
		if j.Regions[j.Vertices[c.vertex].Region].Status != RegionFinished {
			return true
		}
	}
	return false
}

// releaseUnneeded drops every partition of job j that no consumer needs any
// more: when a region of j finished, or j is ending or ended.
func (s *State) releaseUnneeded(j *Job) {
	cons := consumerTable(j.Spec)
	for vi := range j.Vertices {
		for _, e := range s.current[j.ID][vi] {
			if e == nil {
				continue
			}
			if p := s.partitions[e.ID]; p != nil && !s.partitionNeeded(j, p, cons[vi]) {
				s.dropPartition(p)
			}
		}
	}
}

// partitionsOn returns the partitions tracked on an executor, in id order.
func (s *State) partitionsOn(executor string) []*Partition {
	m := s.partsOn[executor]
	out := make([]*Partition, 0, len(m))
	for _, id := range sortedKeys(m) {
		out = append(out, m[id])
	}
	return out
}

// losePartitions handles partitions gone from their executor: each is
// dropped, and every job that still needed one of them, with a consumer
// yet to read it, has its producers run again (rerun), once per job. why
// says how they went ("lost with executor e1"). gone names an executor
// whose executions are ending with it (lost, or moved off): a consumer
// running there has read nothing it keeps.
func (s *State) losePartitions(ps []*Partition, now int64, why, gone string) {
	s.losePartitionsAs(ps, now, why, ending{executor: gone}, false)
}

// losePartitionsAs is losePartitions; moved says the partitions were moved
// off a draining executor, a re-run the restart strategy does not count.
// end says what ends with the loss.
func (s *State) losePartitionsAs(ps []*Partition, now int64, why string, end ending, moved bool) {
	byJob := make(map[string][]*Partition)
	for _, p := range ps {
		byJob[p.Job] = append(byJob[p.Job], p)
	}
	for _, id := range sortedKeys(byJob) {
		j := s.jobs[id]
		var needed []*Partition
		var rd *readers
		if j != nil {
			rd = s.newReaders(j, end)
		}
		for _, p := range byJob[id] {
			if rd != nil && rd.needed(p) && rd.unread(p) {
				needed = append(needed, p)
			}
			s.dropPartition(p)
		}
		if len(needed) > 0 {
			s.rerun(rd, needed, now, partitionCause(j, needed, why), moved)
		}
	}
}

// causeNamesMax bounds the partitions a loss's cause names: it becomes the
// message of the job and of every execution its restart cancels.
const causeNamesMax = 8

// partitionCause says which partitions went and how: "partition of gen/2
// lost with executor e1", "partitions of gen/0, gen/2 ...", "partitions
// of gen/0, ... gen/7 and 992 more ...".
func partitionCause(j *Job, ps []*Partition, why string) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = fmt.Sprintf("%s/%d", j.Spec.Vertices[p.VertexIndex].ID, p.Subtask)
	}
	sort.Strings(names)
	word := "partition"
	if len(names) > 1 {
		word = "partitions"
	}
	list := strings.Join(names[:min(len(names), causeNamesMax)], ", ")
	if len(names) > causeNamesMax {
		list += fmt.Sprintf(" and %d more", len(names)-causeNamesMax)
	}
	return fmt.Sprintf("%s of %s %s", word, list, why)
}

// rerun is one restart of job rd.j that produces the lost partitions
// again: the restart strategy decides whether there is one; if so the
// consumer regions that have yet to read them restart with their failover
// scope (those that have read them go on), and each producer region
// re-runs the lost subtasks (or all of them, see the package comment)
// after the strategy's delay. A re-run of partitions moved off a draining
// executor (moved) is not the strategy's to decide: it happens at once.
func (s *State) rerun(rd *readers, lost []*Partition, now int64, cause string, moved bool) {
	j := rd.j
	var delay int64
	kind := ReasonDrain
	if !moved {
		ok, d, why := s.decide(j, now)
		if !ok {
			s.stopJob(j, JobFailing, cause+"; "+why, now)
			return
		}
		delay, kind = d, ReasonPartitionLost
	}
	s.announceRestart(j, kind, cause, now)
	scope := make(map[int]bool)
	if j.Spec.Failover == jobspec.FailoverFull {
		for r := range j.Regions {
			if j.Regions[r].Status != RegionWaiting {
				scope[r] = true
			}
		}
	} else {
		// Which consumer regions have yet to read them, asked before
		// anything changes.
		reading := make([]bool, len(j.Regions))
		for _, p := range lost {
			for _, c := range rd.cons[p.VertexIndex] {
				if r := j.Vertices[c.vertex].Region; !reading[r] && rd.pending(p, c) {
					reading[r] = true
				}
			}
		}
		for r, yes := range reading {
			switch {
			case !yes:
			case j.Regions[r].Status == RegionWaiting || j.Regions[r].Status == RegionFinished:
			case j.Regions[r].Status == RegionReady:
				// Not placed yet: it waits again for its input.
				s.setRegionStatus(j, r, RegionWaiting)
			default:
				for _, d := range s.failoverScope(j, r) {
					scope[d] = true
				}
			}
		}
	}
	again := make([]Subtask, len(lost))
	for i, p := range lost {
		again[i] = Subtask{Vertex: p.VertexIndex, Index: p.Subtask}
	}
	s.restartScope(j, scope, again, now, delay, regionRestarts+cause)
}

// restartScope restarts, after delay, the regions of job j in scope whole,
// and has the producer subtasks in again produce their output again, with
// what that brings in: see below. Executions of the regions restarting
// whole are cancelled, saying canceled.
func (s *State) restartScope(j *Job, scope map[int]bool, again []Subtask, now, delay int64, canceled string) {
	// Producer regions not otherwise restarting re-run what was lost: only
	// the lost subtasks of a single-vertex region (its other subtasks'
	// partitions are still there), added to those of a re-run already
	// pending. If the region is still running, its other subtasks go on:
	// the re-run starts once they have ended, and covers those of them
	// that did not finish (newAttempts). A region of several vertices,
	// joined by pipelined edges, restarts whole.
	partial := make(map[int]map[Subtask]bool)
	// Work left, per region: its reads to look at (it entered the scope or
	// its re-run grew), its consumers to look at (it entered the scope).
	// Each region is looked at again only when something of it changed:
	// a chain of a thousand regions costs a thousand steps, not a
	// thousand times a thousand.
	reads := make([]bool, len(j.Regions))
	spread := make([]bool, len(j.Regions))
	enter := func(r int) {
		scope[r], reads[r], spread[r] = true, true, true
	}
	for r := range j.Regions {
		if scope[r] {
			enter(r)
		}
	}
	index := vertexIndexes(j.Spec)
	// produceAgain has subtask st's output produced again: by the lost
	// subtasks' re-run of its region, or its region's whole restart. It
	// reports whether that added anything.
	produceAgain := func(st Subtask) bool {
		r := j.Vertices[st.Vertex].Region
		if scope[r] {
			return false
		}
		rs := &j.Regions[r]
		switch {
		case len(rs.Vertices) == 1 && (rs.Status == RegionFinished || rs.Status == RegionRunning ||
			rs.Status == RegionRestarting && len(rs.Rerun) > 0):
			if partial[r] == nil {
				partial[r] = make(map[Subtask]bool)
				for _, st := range rs.Rerun {
					partial[r][st] = true
				}
			}
			if partial[r][st] {
				return false
			}
			partial[r][st], reads[r] = true, true
		case rs.Status == RegionRestarting:
			// A whole restart is pending: it covers the lost subtask.
			return false
		default:
			enter(r)
		}
		return true
	}
	for _, st := range again {
		produceAgain(st)
	}
	// What runs again reads its inputs again: an input whose partition
	// was released (every consumer had finished) or lost is produced again
	// too, in this restart, rather than found missing by a consumer's
	// fetch after --fetch-timeout (a -> b -> c: b re-runs for c after a's
	// partitions were released once b finished).
	//
	// And what restarts whole drops all of its outputs: a consumer region
	// of it not placed yet waits for it again, and one that runs restarts
	// (with its failover scope), as a consumer of a lost partition does;
	// what that restarts reads its inputs again, and so on.
	for more := true; more; {
		more = false
		for r := range j.Regions {
			if !reads[r] {
				continue
			}
			reads[r] = false
			// A re-run of some subtasks also runs those that have not
			// FINISHED when it starts (newAttempts): they read too
			// (those that FINISH meanwhile need not have).
			runs := partial[r]
			if !scope[r] {
				runs = maps.Clone(runs)
				s.addUnfinished(j, r, runs)
			}
			for _, st := range s.readsReleased(j, index, r, scope[r], runs) {
				more = produceAgain(st) || more
			}
		}
		for r := range j.Regions {
			if !spread[r] {
				continue
			}
			spread[r] = false
			for _, d := range j.Regions[r].Downstream {
				switch {
				case scope[d]:
				case j.Regions[d].Status == RegionWaiting || j.Regions[d].Status == RegionFinished:
				case j.Regions[d].Status == RegionReady:
					s.setRegionStatus(j, d, RegionWaiting)
				default:
					for _, x := range s.failoverScope(j, d) {
						if !scope[x] {
							enter(x)
							more = true
						}
					}
				}
			}
		}
	}
	// A consumer of subtasks that run again, not placed yet, waits for them.
	for r := range j.Regions {
		if partial[r] == nil {
			continue
		}
		for _, d := range j.Regions[r].Downstream {
			if !scope[d] && j.Regions[d].Status == RegionReady {
				s.setRegionStatus(j, d, RegionWaiting)
			}
		}
	}
	restart := func(r int, rerun []Subtask) {
		s.setRegionStatus(j, r, RegionRestarting)
		j.Regions[r].RestartAt = now + delay
		j.Regions[r].Rerun = rerun
	}
	for r := range j.Regions {
		switch {
		case scope[r]:
			restart(r, nil)
			s.forEachInRegion(j, r, func(e *Execution) { s.cancelExecution(e, now, canceled) })
		case partial[r] != nil:
			subs := make([]Subtask, 0, len(partial[r]))
			for st := range partial[r] {
				subs = append(subs, st)
			}
			sort.Slice(subs, func(a, b int) bool {
				if subs[a].Vertex != subs[b].Vertex {
					return subs[a].Vertex < subs[b].Vertex
				}
				return subs[a].Index < subs[b].Index
			})
			restart(r, subs)
		}
	}
	s.refreshActive(j, now)
}

// readsReleased lists the producer subtasks (of other regions) whose
// output the subtasks of region r that run again read (all of them when
// whole, else those of partial) and whose current attempt FINISHED with
// its partition no longer tracked: released or lost. In order, once each.
// index maps the job's vertex ids to their indexes.
// An all-to-all input is looked at once, whatever number of its readers
// run again: a failure in a 10,000 by 10,000 job costs 20,000 steps, not
// a hundred million.
func (s *State) readsReleased(j *Job, index map[string]int, r int, whole bool, partial map[Subtask]bool) []Subtask {
	var out []Subtask
	seen := make(map[Subtask]bool)
	cur := s.current[j.ID]
	add := func(pv, ps int) {
		st := Subtask{Vertex: pv, Index: ps}
		e := cur[pv][ps]
		if seen[st] || e == nil || e.State != wire.StateFinished || s.partitions[e.ID] != nil {
			return
		}
		seen[st] = true
		out = append(out, st)
	}
	for _, vi := range j.Regions[r].Vertices {
		runs := whole // does a subtask of vi run again?
		for st := range partial {
			runs = runs || st.Vertex == vi
		}
		if !runs {
			continue
		}
		for _, in := range j.Spec.Vertices[vi].Inputs {
			pv, ok := index[in.From]
			if !ok || j.Vertices[pv].Region == r {
				continue // read within the region: run again with it
			}
			if !in.Forward() {
				for ps := range cur[pv] {
					add(pv, ps)
				}
				continue
			}
			for i := range j.Vertices[vi].Attempts {
				if i < len(cur[pv]) && (whole || partial[Subtask{Vertex: vi, Index: i}]) {
					add(pv, i)
				}
			}
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Vertex != out[b].Vertex {
			return out[a].Vertex < out[b].Vertex
		}
		return out[a].Index < out[b].Index
	})
	return out
}

func (s *State) applyLosePartitions(c *LosePartitions) Result {
	var ps []*Partition
	for _, id := range c.IDs {
		if p := s.partitions[id]; p != nil && p.Executor == c.Executor {
			ps = append(ps, p)
		}
	}
	s.losePartitions(ps, c.Time, c.Reason, "")
	return Result{}
}

// unavailable handles a consumer execution e that FAILED because it could
// not fetch the partitions ids: those still tracked are lost, and so is the
// output of a producer's current, FINISHED attempt that is no longer
// tracked. That happens when a consumer region runs again after its input
// was released: its own output was lost (a -> b -> c: b re-runs for c
// after a's partition was released once b finished). Without that, b
// would restart on the missing input until its strategy gave up. It reports
// whether any was lost, in which case the failure is part of the restart
// that re-produces them rather than one of its own.
func (s *State) unavailable(e *Execution, ids []string, now int64, msg string) bool {
	ps := s.unreadable(e, ids)
	if len(ps) == 0 {
		return false
	}
	why := "unavailable to " + e.ID
	if msg != "" {
		why += ": " + msg
	}
	// e ends with the loss (it FAILED): it has yet to read them, and its
	// region restarts with their re-run, its failure part of it.
	s.losePartitionsAs(ps, now, why, ending{execution: e.ID}, false)
	return true
}

// UnavailableInputs returns, of ids that consumer execution names as
// unreadable, those a report of it would act on (unavailable): partitions,
// tracked or released, of what it reads, each once. The leader proposes
// only these: an executor's list is bounded by what it sends, not by what
// the consumer reads.
func (s *State) UnavailableInputs(consumer string, ids []string) []string {
	e := s.execs[consumer]
	if e == nil {
		return nil
	}
	ps := s.unreadable(e, ids)
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// unreadable returns the partitions, tracked or released, that ids name
// and that e reads (an output of a vertex its own vertex takes as input,
// in its own job), each once, in the order named. An executor names what
// its consumer could not read; it has no say over other partitions.
func (s *State) unreadable(e *Execution, ids []string) []*Partition {
	var ps []*Partition
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if p := s.partitions[id]; p != nil && s.reads(e, p.Job, p.VertexIndex) {
			ps = append(ps, p)
		} else if p := s.releasedOutput(e, id); p != nil && s.reads(e, p.Job, p.VertexIndex) {
			ps = append(ps, p)
		}
	}
	return ps
}

// reads reports whether execution e reads the output of vertex (an index)
// of job: its own job's, of a vertex its vertex takes as input.
func (s *State) reads(e *Execution, job string, vertex int) bool {
	j := s.jobs[e.Job]
	if job != e.Job || j == nil || vertex < 0 || vertex >= len(j.Spec.Vertices) || e.VertexIndex >= len(j.Spec.Vertices) {
		return false
	}
	from := j.Spec.Vertices[vertex].ID
	for _, in := range j.Spec.Vertices[e.VertexIndex].Inputs {
		if in.From == from {
			return true
		}
	}
	return false
}

// releasedOutput returns, untracked, the partition the consumer e read from
// producer execution id when that is the current, FINISHED attempt of a
// subtask of e's job whose partition is no longer tracked; else nil.
func (s *State) releasedOutput(e *Execution, id string) *Partition {
	pe := s.execs[id]
	if pe == nil || pe.Job != e.Job || pe.State != wire.StateFinished {
		return nil
	}
	cur := s.current[pe.Job]
	if pe.VertexIndex >= len(cur) || pe.Subtask >= len(cur[pe.VertexIndex]) || cur[pe.VertexIndex][pe.Subtask] != pe {
		return nil
	}
	return &Partition{ID: pe.ID, Job: pe.Job, VertexIndex: pe.VertexIndex, Subtask: pe.Subtask, Attempt: pe.Attempt, Executor: pe.Executor}
}

// Partitions lists the tracked partitions, in id order.
func (s *State) Partitions() []Partition {
	out := make([]Partition, 0, len(s.partitions))
	for _, id := range sortedKeys(s.partitions) {
		out = append(out, *s.partitions[id])
	}
	return out
}

// PartitionsOn lists the partitions tracked on an executor, in id order.
func (s *State) PartitionsOn(executor string) []Partition {
	ps := s.partitionsOn(executor)
	out := make([]Partition, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out
}

// NumPartitions counts the tracked partitions.
func (s *State) NumPartitions() int { return len(s.partitions) }

// ProducerLive reports whether id is an execution the state has that has
// not ended: a partition an executor reports for it is in flight (its
// FINISHED not recorded yet), not unknown.
func (s *State) ProducerLive(id string) bool {
	e, ok := s.execs[id]
	return ok && !e.State.Terminal()
}

// edgeIndex is what dataEdges asks of a job's graph, built once for
// all of its vertices: a job of a thousand vertices and tens of thousands
// of edges would otherwise scan every edge for every task.
type edgeIndex struct {
	cons  [][]consumerEdge
	index map[string]int
}

func newEdgeIndex(spec *jobspec.Spec) *edgeIndex {
	return &edgeIndex{cons: consumerTable(spec), index: vertexIndexes(spec)}
}

// dataEdges returns the outputs and inputs of vertex vi of job j as the data
// plane sees them: the consumers it writes for and the producers it reads,
// each producer subtask's current attempt and executor. An edge is blocking
// when it joins two regions; one inside a region is pipelined whatever the
// spec says (the two run together).
// x is the job's edge index.
func (s *State) dataEdges(j *Job, vi int, x *edgeIndex) (outputs []wire.Output, inputs []wire.Input) {
	region := j.Vertices[vi].Region
	mode := func(other int) string {
		if j.Vertices[other].Region != region {
			return wire.ModeBlocking
		}
		return wire.ModePipelined
	}
	for _, c := range x.cons[vi] {
		cv := &j.Spec.Vertices[c.vertex]
		outputs = append(outputs, wire.Output{Vertex: cv.ID, Parallelism: cv.Parallelism, Mode: mode(c.vertex), Forward: c.forward})
	}
	if len(j.Spec.Vertices[vi].Inputs) == 0 {
		return outputs, nil
	}
	for _, in := range j.Spec.Vertices[vi].Inputs {
		pi := x.index[in.From]
		w := wire.Input{Vertex: in.From, Mode: mode(pi), Forward: in.Forward()}
		w.Sources = make([]wire.Source, 0, len(s.current[j.ID][pi]))
		for i, e := range s.current[j.ID][pi] {
			src := wire.Source{Subtask: i}
			if e != nil {
				src.Execution, src.Executor = e.ID, e.Executor
			}
			w.Sources = append(w.Sources, src)
		}
		inputs = append(inputs, w)
	}
	return outputs, inputs
}
