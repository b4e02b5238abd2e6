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

// checkQuota is quotaError for a submit of spec under id on this master's
// state, with what earlier submits of the same batch admitted (admitted,
// which it adds this one to when it is new); a job that exists already is
// no new one (its submit is a retry, or a conflict).
func (m *Master) checkQuota(id string, spec *jobspec.Spec, admitted *quotaAdmitted) error {
	if m.cfg.MaxJobs <= 0 && m.cfg.MaxExecutions <= 0 {
		return nil
	}
	if admitted.ids[id] {
		return nil // counted already: this one is a retry of it
	}
	var jobs, execs int
	var exists bool
	m.fsm.Read(func(st *fsm.State) {
		exists = st.HasJob(id)
		jobs, execs = st.NumJobs(), st.NumExecutions()
	})
	if exists {
		return nil
	}
	n := subtasksOf(spec)
	if err := quotaError(jobs+admitted.jobs, execs+admitted.execs, n, m.cfg.MaxJobs, m.cfg.MaxExecutions); err != nil {
		return err
	}
	if admitted.ids == nil {
		admitted.ids = map[string]bool{}
	}
	admitted.ids[id] = true
	admitted.jobs++
	admitted.execs += n
	return nil
}

// quotaAdmitted is what the submits admitted and not yet applied: the
// jobs they add, and those jobs' subtasks (ids: those of the batch being
// checked).
type quotaAdmitted struct {
	ids         map[string]bool
	jobs, execs int
}

// quotaLedger counts, on the leader, the jobs and subtasks admitted and
// not yet applied, so that every check counts those of the others in
// flight: submits decided at the same moment cannot together pass a
// quota. (Between an entry's apply and its release a check counts its
// jobs twice, and may refuse near the quota what would have fit.)
type quotaLedger struct {
	mu          sync.Mutex
	jobs, execs int
}

// admit runs check with the admitted count of the others in flight, and
// adds what check admitted to it until the returned release is called
// (once the entry has been applied, or has failed).
func (q *quotaLedger) admit(check func(*quotaAdmitted)) (release func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := quotaAdmitted{jobs: q.jobs, execs: q.execs}
	check(&a)
	jobs, execs := a.jobs-q.jobs, a.execs-q.execs
	q.jobs += jobs
	q.execs += execs
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.jobs -= jobs
		q.execs -= execs
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
