package master

import (
	"fmt"
	"sync"

	"jobmaster/fsm"
	"jobmaster/jobspec"
)

// Quotas on the replicated state (--max-jobs, --max-executions; docs/
// security.md, "Bounds"), as etcd's --quota-backend-bytes bounds its
// database: the leader checks a submit against them before proposing it,
// and refuses it with 429 when it would pass one. The FSM knows nothing
// of them. The count is of what the state holds: running jobs and ended
// ones not forgotten yet (--job-retention), and every attempt of their
// subtasks. The check counts the state as applied and what the leader
// admitted and has not applied yet (quotaLedger). Restarts of admitted
// jobs are never refused, so executions may grow past theirs by new
// attempts.

// quotaError is the refusal of a submit, or nil when it fits: a job new to
// a state of jobs jobs and execs executions, whose spec has subtasks
// subtasks, under quotas maxJobs and maxExecs (0: none).
func quotaError(jobs, execs, subtasks, maxJobs, maxExecs int) error {
	switch {
	case maxJobs > 0 && jobs+1 > maxJobs:
		return fmt.Errorf("quota reached: the cluster holds %d jobs, and --max-jobs is %d; wait for ended jobs to be forgotten (--job-retention), or raise the quota", jobs, maxJobs)
	case maxExecs > 0 && execs+subtasks > maxExecs:
		return fmt.Errorf("quota reached: the cluster holds %d executions, and this job's %d subtasks would pass --max-executions (%d); wait for ended jobs to be forgotten (--job-retention), or raise the quota", execs, subtasks, maxExecs)
	}
	return nil
}

// admitQuota checks the submissions subs[at...] against the quotas, on
// this master's state and what the leader admitted and has not applied
// yet (m.quota), and returns those within them, in order, with the release
// of what it admitted (to call once their entry has applied or failed). A
// job that exists already, or is admitted and not yet applied, is no new
// one (its submit is a retry, or a conflict). refuse is called with each
// refused submission and why.
func (m *Master) admitQuota(subs []submission, at []int, refuse func(i int, err error)) (within []int, release func()) {
	if m.cfg.MaxJobs <= 0 && m.cfg.MaxExecutions <= 0 {
		return at, func() {}
	}
	return m.quota.admit(m.fsm, subs, at, m.cfg.MaxJobs, m.cfg.MaxExecutions, refuse)
}

// quotaLedger holds, on the leader, the jobs admitted and not yet applied
// (id: subtasks), so that every check counts those of the others in
// flight: submits decided at the same moment cannot together pass a
// quota. One that has applied is counted from the state, not twice.
type quotaLedger struct {
	mu      sync.Mutex
	pending map[string]*pendingJob
}

// pendingJob is a job admitted and not yet applied: its subtasks, and how
// many submissions of it (a first and its retries) are in flight.
type pendingJob struct {
	subtasks, refs int
}

func (q *quotaLedger) admit(f *fsm.FSM, subs []submission, at []int, maxJobs, maxExecs int, refuse func(int, error)) (within []int, release func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var jobs, execs int
	exists := make([]bool, len(at))
	f.Read(func(st *fsm.State) {
		jobs, execs = st.NumJobs(), st.NumExecutions()
		for id, p := range q.pending {
			if !st.HasJob(id) {
				jobs++
				execs += p.subtasks
			}
		}
		for k, i := range at {
			exists[k] = st.HasJob(subs[i].ID)
		}
	})
	if q.pending == nil {
		q.pending = map[string]*pendingJob{}
	}
	mine := map[string]bool{} // the jobs this batch holds a place of
	for k, i := range at {
		id := subs[i].ID
		p, inFlight := q.pending[id]
		switch {
		case exists[k]:
		case inFlight && mine[id]:
		case inFlight: // a retry of a job in flight: held as long as either is
			p.refs++
			mine[id] = true
		default:
			n := subtasksOf(subs[i].Spec)
			if err := quotaError(jobs, execs, n, maxJobs, maxExecs); err != nil {
				refuse(i, err)
				continue
			}
			jobs++
			execs += n
			q.pending[id] = &pendingJob{subtasks: n, refs: 1}
			mine[id] = true
		}
		within = append(within, i)
	}
	return within, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		for id := range mine {
			if p := q.pending[id]; p != nil {
				if p.refs--; p.refs == 0 {
					delete(q.pending, id)
				}
			}
		}
	}
}

// checkFits refuses a new job with a region that can never fit the
// executors the leader knows (leader.Core.Unfit); a job that exists
// already is a retry or a conflict, judged by the FSM.
func (m *Master) checkFits(s *session, id string, spec *jobspec.Spec) error {
	var exists bool
	m.fsm.Read(func(st *fsm.State) { exists = st.HasJob(id) })
	if exists || s == nil || s.tracker == nil {
		return nil
	}
	return s.tracker.core.Unfit(spec)
}

func subtasksOf(spec *jobspec.Spec) int {
	n := 0
	for _, v := range spec.Vertices {
		n += v.Parallelism
	}
	return n
}
