package fsm

import (
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// consumerEdge is an edge from a producer vertex to the consumer vertex
// that reads it.
type consumerEdge struct {
	vertex  int
	forward bool
}

// consumerTable lists, for every vertex of spec, the edges to the vertices
// that read it, in index order: consumersOf for all of them at once, in
// one pass over the edges, for a caller that asks about many partitions.
func consumerTable(spec *jobspec.Spec) [][]consumerEdge {
	index := vertexIndexes(spec)
	out := make([][]consumerEdge, len(spec.Vertices))
	for ci := range spec.Vertices {
		for _, in := range spec.Vertices[ci].Inputs {
			if pv, ok := index[in.From]; ok {
				out[pv] = append(out[pv], consumerEdge{vertex: ci, forward: in.Forward()})
			}
		}
	}
	return out
}

// ending is what ends with a loss of partitions, having read nothing it
// keeps: the executions on an executor lost or moved off, or a consumer
// that FAILED because it could not fetch them.
type ending struct {
	executor  string
	execution string
}

// vertexIndexes maps the ids of spec's vertices to their indexes.
func vertexIndexes(spec *jobspec.Spec) map[string]int {
	index := make(map[string]int, len(spec.Vertices))
	for i := range spec.Vertices {
		index[spec.Vertices[i].ID] = i
	}
	return index
}

// readers answers, for partitions of job j lost together, which consumers
// have yet to read them (see the package comment on loss). end is what
// ends with the loss. It reads a state that does not change while it is
// used, and remembers what an all-to-all edge asks (any subtask of a
// vertex yet to read) and a region's re-run set.
type readers struct {
	s     *State
	j     *Job
	end   ending
	cons  [][]consumerEdge
	any   map[int]bool // per consumer vertex: a subtask yet to read
	rerun map[int]map[Subtask]bool
}

func (s *State) newReaders(j *Job, end ending) *readers {
	return &readers{s: s, j: j, end: end, cons: consumerTable(j.Spec), any: map[int]bool{}, rerun: map[int]map[Subtask]bool{}}
}

// needed is partitionNeeded, with the table at hand.
func (rd *readers) needed(p *Partition) bool {
	return rd.s.partitionNeeded(rd.j, p, rd.cons[p.VertexIndex])
}

// unread reports whether some consumer has yet to read partition p.
func (rd *readers) unread(p *Partition) bool {
	for _, c := range rd.cons[p.VertexIndex] {
		if rd.pending(p, c) {
			return true
		}
	}
	return false
}

// pending reports whether consumer edge c has a subtask yet to read p. A
// consumer in p's own region reads it as a stream while the region runs:
// it counts as yet to read until the region has FINISHED.
func (rd *readers) pending(p *Partition, c consumerEdge) bool {
	j := rd.j
	r := j.Vertices[c.vertex].Region
	rs := &j.Regions[r]
	switch {
	case rs.Status == RegionFinished:
		return false
	case r == j.Vertices[p.VertexIndex].Region:
		return true
	}
	cur := rd.s.current[j.ID][c.vertex]
	if c.forward {
		return p.Subtask < len(cur) && rd.willRead(r, c.vertex, p.Subtask, cur[p.Subtask])
	}
	v, ok := rd.any[c.vertex]
	if !ok {
		for i, e := range cur {
			if v = rd.willRead(r, c.vertex, i, e); v {
				break
			}
		}
		rd.any[c.vertex] = v
	}
	return v
}

// willRead reports whether subtask i of vertex vi in region r, whose
// current attempt is e, has yet to read its blocking inputs. A task starts
// only once they are on its executor's disk, whole: in a running region,
// one that has not started has yet to, and so does one that ends with the
// loss (on the executor that goes, or the consumer that failed to fetch). A restarting region runs
// all of its subtasks again, or, re-running some, those and the ones that
// had not FINISHED (newAttempts); a waiting or ready one runs those that
// have not FINISHED (after a partial restart the others keep their
// attempt).
func (rd *readers) willRead(r, vi, i int, e *Execution) bool {
	rs := &rd.j.Regions[r]
	switch rs.Status {
	case RegionRunning:
		if e == nil || e.ID == rd.end.execution {
			return true
		}
		return !(e.State == wire.StateFinished || e.State == wire.StateRunning && e.Executor != rd.end.executor)
	case RegionRestarting:
		if len(rs.Rerun) == 0 {
			return true
		}
		set, ok := rd.rerun[r]
		if !ok {
			set = make(map[Subtask]bool, len(rs.Rerun))
			for _, st := range rs.Rerun {
				set[st] = true
			}
			rd.rerun[r] = set
		}
		if set[Subtask{Vertex: vi, Index: i}] {
			return true
		}
	}
	return e == nil || e.State != wire.StateFinished
}
