package master

import (
	"fmt"
	"sync"

	"jobmaster/fsm"
	"jobmaster/jobspec"
)

// Quotas on the replicated state (--max-jobs, --max-executions,
// --max-spec-bytes; docs/security.md, "Bounds"), as etcd's
// --quota-backend-bytes bounds its database: the leader checks a submit
// against them before proposing it, and refuses it with 429 when it would
// pass one. The FSM knows nothing of them. The count is of what the state
// holds: running jobs and ended ones not forgotten yet (--job-retention),
// every attempt of their subtasks, and their specs' footprints
// (jobspec.Spec.Footprint). The check counts the state as applied and what
// the leader admitted and has not applied yet (quotaLedger). Restarts of
// admitted jobs are never refused, so executions may grow past theirs by
// new attempts.

// quotas counts what the quotas count: jobs, executions and the specs'
// footprints. It is both the limits a submit is checked against (0: none)
// and what the state holds, or would hold.
type quotas struct {
	jobs, execs int
	specBytes   int64
}

func (q quotas) none() bool { return q.jobs <= 0 && q.execs <= 0 && q.specBytes <= 0 }

// quotaError is the refusal of a submit, or nil when it fits: one that
// adds add (a new job: one job, its subtasks and its spec's footprint) to
// a state that holds h, under quotas q.
func quotaError(h, add, q quotas) error {
	switch {
	case q.jobs > 0 && add.jobs > 0 && h.jobs+add.jobs > q.jobs:
		return fmt.Errorf("quota reached: the cluster holds %d jobs, and --max-jobs is %d; wait for ended jobs to be forgotten (--job-retention), or raise the quota", h.jobs, q.jobs)
	case q.execs > 0 && add.execs > 0 && h.execs+add.execs > q.execs:
		return fmt.Errorf("quota reached: the cluster holds %d executions, and this job's %d subtasks would pass --max-executions (%d); wait for ended jobs to be forgotten (--job-retention), or raise the quota", h.execs, add.execs, q.execs)
	case q.specBytes > 0 && add.specBytes > 0 && h.specBytes+add.specBytes > q.specBytes:
		return fmt.Errorf("quota reached: the cluster's job specs take %d bytes, and this job's %d would pass --max-spec-bytes (%d); wait for ended jobs to be forgotten (--job-retention), or raise the quota", h.specBytes, add.specBytes, q.specBytes)
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
	q := quotas{jobs: m.cfg.MaxJobs, execs: m.cfg.MaxExecutions, specBytes: m.cfg.MaxSpecBytes}
	if q.none() {
		return at, func() {}
	}
	return m.quota.admit(m.fsm, subs, at, q, refuse)
}

// quotaLedger holds, on the leader, the jobs admitted and not yet applied
// (id: subtasks), so that every check counts those of the others in
// flight: submits decided at the same moment cannot together pass a
// quota. One that has applied is counted from the state, not twice.
type quotaLedger struct {
	mu      sync.Mutex
	pending map[string]*pendingJob
}

// pendingJob is a job admitted and not yet applied: its subtasks, its
// spec's footprint, and how many submissions of it (a first and its
// retries) are in flight.
type pendingJob struct {
	subtasks, refs int
	specBytes      int64
}

func (q *quotaLedger) admit(f *fsm.FSM, subs []submission, at []int, limits quotas, refuse func(int, error)) (within []int, release func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var h quotas
	exists := make([]bool, len(at))
	f.Read(func(st *fsm.State) {
		h = quotas{jobs: st.NumJobs(), execs: st.NumExecutions(), specBytes: st.SpecBytes()}
		for id, p := range q.pending {
			if !st.HasJob(id) {
				h.jobs++
				h.execs += p.subtasks
				h.specBytes += p.specBytes
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
		case inFlight:
			// A retry of a job in flight, held as long as either is. Its
			// spec may differ (a conflict, or the first caller may leave
			// and this one create the job): the place held grows to the
			// larger of the two, checked as any new room is.
			n, fp := subtasksOf(subs[i].Spec), subs[i].Spec.Footprint()
			more := quotas{execs: max(0, n-p.subtasks), specBytes: max(0, fp-p.specBytes)}
			if err := quotaError(h, more, limits); err != nil {
				refuse(i, err)
				continue
			}
			h.execs += more.execs
			h.specBytes += more.specBytes
			p.subtasks += more.execs
			p.specBytes += more.specBytes
			if !mine[id] {
				p.refs++
				mine[id] = true
			}
		default:
			add := quotas{jobs: 1, execs: subtasksOf(subs[i].Spec), specBytes: subs[i].Spec.Footprint()}
			if err := quotaError(h, add, limits); err != nil {
				refuse(i, err)
				continue
			}
			h.jobs++
			h.execs += add.execs
			h.specBytes += add.specBytes
			q.pending[id] = &pendingJob{subtasks: add.execs, specBytes: add.specBytes, refs: 1}
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
