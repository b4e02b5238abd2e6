package fsm

import (
	"hash/fnv"

	"jobmaster/wire"
)

// Generations of a job id (docs/architecture.md, "Job ids used again").
//
// An execution id is <job>/<vertex>/<subtask>/<attempt>, and none may be
// used twice: an executor may still hold, or remember, an execution of an
// earlier job under the same id. So each new job under an id (a new
// generation) starts its attempts above every attempt of the id's earlier
// jobs. While the id's tombstone is kept, it says where (Tombstone.Next).
// Once the tombstone is pruned, its Next is folded into the attempt floor
// of the id's bucket: one of floorBuckets buckets, by a hash of the id. A
// job whose id has no tombstone starts at its bucket's floor: 0 until an
// id of that bucket was pruned, and never below any pruned generation of
// its own id. The floors cost a bounded table however many ids come and
// go; an id that shares a bucket with a pruned one merely starts higher.

// floorBuckets is the size of the attempt floor table.
const floorBuckets = 4096

// Floor is one bucket's attempt floor, as snapshots store it.
type Floor struct {
	Bucket int `codec:"b"`
	Next   int `codec:"n"`
}

// bucketOf is the floor bucket of a job id.
func bucketOf(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % floorBuckets)
}

// firstAttempt is the attempt a new job under id starts at.
func (s *State) firstAttempt(id string) int {
	return max(s.forgotten[id].Next, s.floors[bucketOf(id)])
}

// pruneTombstone drops a tombstone, folding it into its bucket's floor.
func (s *State) pruneTombstone(id string) {
	t, ok := s.forgotten[id]
	if !ok {
		return
	}
	delete(s.forgotten, id)
	if b := bucketOf(id); t.Next > s.floors[b] {
		s.floors[b] = t.Next
	}
}

// FirstAttempt is the attempt a job submitted now under id would start at.
func (s *State) FirstAttempt(id string) int { return s.firstAttempt(id) }

// Tombstone returns the tombstone of a forgotten job id, if it is kept.
func (s *State) Tombstone(id string) (Tombstone, bool) {
	t, ok := s.forgotten[id]
	return t, ok
}

// Floors lists the attempt floors, by bucket.
func (s *State) Floors() []Floor {
	out := make([]Floor, 0, len(s.floors))
	for b := 0; b < floorBuckets && len(out) < len(s.floors); b++ {
		if n, ok := s.floors[b]; ok {
			out = append(out, Floor{Bucket: b, Next: n})
		}
	}
	return out
}

// CarryAttempts makes s, a state about to replace cur (a backup restored
// over a running cluster), use no execution id that cur used: executors
// may still hold or remember those executions, their directories and
// their logs. For every job id cur knows (a job, a tombstone, a floor's
// bucket), the attempts cur reached are carried into s: into the floor of
// the id's bucket when s has no job under the id (a new job there starts
// above them), into its tombstone's Next when s has one, and into the
// job's AttemptFloor when s has the job (its restarts go above them; its
// placed current attempts stay, so that tasks running since before the
// backup are adopted, and those placed nowhere yet move above them: the
// replaced state may have placed them since). Pure: the leader applies it
// to the decoded backup before Raft installs it, so every master restores
// the same state.
func (s *State) CarryAttempts(cur *State) {
	for b, n := range cur.floors {
		s.floors[b] = max(s.floors[b], n)
	}
	carry := func(id string, next int) {
		if next <= 0 {
			return
		}
		if j, ok := s.jobs[id]; ok {
			j.AttemptFloor = max(j.AttemptFloor, next)
			s.forEachCurrent(j, func(e *Execution) {
				if e.State == wire.StateScheduled && e.Executor == "" && e.Attempt < next {
					delete(s.execs, e.ID)
					e.Attempt, e.ID = next, ExecutionID(j.ID, e.Vertex, e.Subtask, next)
					s.execs[e.ID] = e
					j.Vertices[e.VertexIndex].Attempts[e.Subtask] = next
				}
			})
			return
		}
		if t, ok := s.forgotten[id]; ok {
			t.Next = max(t.Next, next)
			s.forgotten[id] = t
			return
		}
		if b := bucketOf(id); next > s.floors[b] {
			s.floors[b] = next
		}
	}
	for id, j := range cur.jobs {
		next := j.AttemptFloor
		for _, v := range j.Vertices {
			for _, a := range v.Attempts {
				next = max(next, a+1)
			}
		}
		carry(id, next)
	}
	for id, t := range cur.forgotten {
		carry(id, t.Next)
	}
}
