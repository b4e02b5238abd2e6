package fsm

import (
	"fmt"
	"jobmaster/wire"
	"reflect"
)

func (s *State) applySubmit(index uint64, c *SubmitJob) Result {
	if c.Spec == nil {
		return Result{Err: fmt.Errorf("submit %q: no spec", c.ID)}
	}
	if old, ok := s.jobs[c.ID]; ok {
		if reflect.DeepEqual(old.Spec, c.Spec) {
			return Result{}
		}
		return Result{Err: fmt.Errorf("%w: %q", ErrConflict, c.ID), Status: old.Status}
	}
	// Specs arrive normalized; normalizing again is a cheap guard against a
	// proposer that skipped it, and is deterministic.
	spec := *c.Spec
	if err := spec.Normalize(); err != nil {
		return Result{Err: fmt.Errorf("submit %q: %w", c.ID, err)}
	}
	base := s.firstAttempt(c.ID)
	delete(s.forgotten, c.ID)
	j := &Job{
		ID:          c.ID,
		Spec:        &spec,
		Status:      JobCreated,
		SubmitIndex: index,
		SubmitTime:  c.Time,
		Vertices:    make([]VertexState, len(spec.Vertices)),
	}
	for ri, r := range spec.Regions() {
		j.Regions = append(j.Regions, RegionState{Vertices: r.Vertices, Upstream: r.Upstream, Downstream: r.Downstream})
		for _, vi := range r.Vertices {
			attempts := make([]int, spec.Vertices[vi].Parallelism)
			for i := range attempts {
				attempts[i] = base
			}
			j.Vertices[vi] = VertexState{Region: ri, Attempts: attempts}
		}
	}
	s.jobs[j.ID] = j
	s.specBytes += spec.Footprint()
	s.touchJob(j, true)
	for ri := range j.Regions {
		s.newAttempts(j, ri, false, c.Time)
	}
	return Result{Created: true}
}

// newAttempts creates a SCHEDULED execution for every subtask of a region:
// attempt 0 for a new job, the next attempt on restart (next == true), whose
// previous attempts have all ended and are dropped. The region becomes ready
// or waiting.
//
// A restart limited to some subtasks (RegionState.Rerun) creates new
// attempts of those, and of any other whose attempt ended other than
// FINISHED (it was still running when the re-run was decided); the others
// keep their FINISHED attempt and its partition.
func (s *State) newAttempts(j *Job, ri int, next bool, now int64) {
	cur := s.currentOf(j)
	r := &j.Regions[ri]
	var only map[Subtask]bool
	if next && len(r.Rerun) > 0 {
		only = make(map[Subtask]bool, len(r.Rerun))
		for _, st := range r.Rerun {
			only[st] = true
		}
		s.addUnfinished(j, ri, only)
	}
	r.Rerun = nil
	// A FINISHED attempt that runs again says why: the restart's cause (the
	// job's message), which a later restart would replace on the job.
	ranAgain := ""
	if j.Message != "" {
		ranAgain = "ran again: " + j.Message
	}
	for _, vi := range r.Vertices {
		v := &j.Vertices[vi]
		vid := j.Spec.Vertices[vi].ID
		for i := range v.Attempts {
			if only != nil && !only[Subtask{vi, i}] {
				continue
			}
			if next {
				old := ExecutionID(j.ID, vid, i, v.Attempts[i])
				if e := s.execs[old]; e != nil {
					if e.State == wire.StateFinished {
						v.Finished--
					}
					if v.Previous == nil {
						v.Previous = make([]PreviousAttempt, len(v.Attempts))
					}
					msg := e.Message
					if e.State == wire.StateFinished && msg == "" {
						msg = ranAgain
					}
					v.Previous[i] = PreviousAttempt{Attempt: e.Attempt, State: e.State, Message: msg, EndTime: e.EndTime, Executor: e.Executor}
				}
				s.dropPartition(s.partitions[old])
				delete(s.execs, old)
				v.Attempts[i] = max(v.Attempts[i]+1, j.AttemptFloor)
			}
			e := &Execution{
				ID:          ExecutionID(j.ID, vid, i, v.Attempts[i]),
				Job:         j.ID,
				Vertex:      vid,
				VertexIndex: vi,
				Subtask:     i,
				Attempt:     v.Attempts[i],
				State:       wire.StateScheduled,
			}
			s.execs[e.ID] = e
			cur[vi][i] = e
			s.live[regionRef{j.ID, ri}]++
			if next && s.rec != nil {
				s.emitExec(e, "", now)
			}
		}
		if only == nil {
			v.Finished = 0
		}
	}
	s.setRegionStatus(j, ri, RegionWaiting)
	if s.upstreamFinished(j, ri) {
		s.setRegionStatus(j, ri, RegionReady)
	}
}

// addUnfinished adds to set every subtask of region ri whose current
// attempt has not FINISHED: what a re-run of some of its subtasks runs
// besides them.
func (s *State) addUnfinished(j *Job, ri int, set map[Subtask]bool) {
	for _, vi := range j.Regions[ri].Vertices {
		for i, a := range j.Vertices[vi].Attempts {
			if e := s.execs[ExecutionID(j.ID, j.Spec.Vertices[vi].ID, i, a)]; e == nil || e.State != wire.StateFinished {
				set[Subtask{vi, i}] = true
			}
		}
	}
}

func (s *State) upstreamFinished(j *Job, ri int) bool {
	for _, u := range j.Regions[ri].Upstream {
		if j.Regions[u].Status != RegionFinished {
			return false
		}
	}
	return true
}

// setRegionStatus changes a region's status and keeps the ready and
// restarting indexes in step.
func (s *State) setRegionStatus(j *Job, ri int, st RegionStatus) {
	ref := regionRef{j.ID, ri}
	old := j.Regions[ri].Status
	if old == st {
		return
	}
	switch old {
	case RegionReady:
		s.ready.remove(ref)
		s.noteJoinable(ref.job)
	case RegionRestarting:
		delete(s.restarting, ref)
	}
	switch st {
	case RegionReady:
		s.ready.add(ref, j.SubmitIndex)
		s.noteJoinable(ref.job)
	case RegionRestarting:
		s.restarting[ref] = struct{}{}
	}
	j.Regions[ri].Status = st
}

func (s *State) applyCancel(c *CancelJob) Result {
	j, ok := s.jobs[c.ID]
	if !ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrNotFound, c.ID)}
	}
	if j.Status.Terminal() || j.Status.ending() {
		return Result{Status: j.Status, Unchanged: true}
	}
	s.stopJob(j, JobCancelling, "canceled by user", c.Time)
	return Result{Status: j.Status}
}

// stopJob moves a job to CANCELLING or FAILING: every live execution is
// cancelled (at once if it was never placed), and the job ends when the last
// one has.
func (s *State) stopJob(j *Job, st JobStatus, msg string, now int64) {
	s.setJobStatus(j, st)
	s.setJobMessage(j, msg)
	for ri := range j.Regions {
		s.setRegionStatus(j, ri, RegionStopped)
	}
	why := msg
	if st == JobFailing {
		why = "the job fails: " + msg
	}
	s.forEachCurrent(j, func(e *Execution) {
		s.cancelExecution(e, now, why)
	})
	s.releaseUnneeded(j)
	s.maybeEnd(j, now)
}

// cancelExecution asks a live execution to stop, for the reason why (its
// message, kept when its executor confirms): one never placed is CANCELED
// at once; a placed one is CANCELING until its executor confirms.
func (s *State) cancelExecution(e *Execution, now int64, why string) {
	switch {
	case e.State.Terminal() || e.State == wire.StateCanceling:
	case e.State == wire.StateScheduled:
		e.EndTime = now
		e.Message = why
		s.setExecState(e, wire.StateCanceled, now)
		if j := s.jobs[e.Job]; j != nil {
			s.ended(regionOf(j, e))
		}
	default:
		e.Message = why
		s.setExecState(e, wire.StateCanceling, now)
		m := s.canceling[e.Executor]
		if m == nil {
			m = make(map[string]struct{})
			s.canceling[e.Executor] = m
		}
		m[e.ID] = struct{}{}
	}
}

// maybeEnd ends a stopping job once none of its executions is live.
func (s *State) maybeEnd(j *Job, now int64) {
	if !j.Status.ending() {
		return
	}
	for ri := range j.Regions {
		if s.regionLive(j, ri) {
			return
		}
	}
	if j.Status == JobCancelling {
		s.setJobStatus(j, JobCanceled)
	} else {
		s.setJobStatus(j, JobFailed)
	}
	j.EndTime = now
}

// forEachCurrent calls f with the current attempt of every subtask, in
// vertex and subtask order.
func (s *State) forEachCurrent(j *Job, f func(*Execution)) {
	for vi := range j.Vertices {
		s.forEachInVertex(j, vi, f)
	}
}

func (s *State) forEachInVertex(j *Job, vi int, f func(*Execution)) {
	for _, e := range s.current[j.ID][vi] {
		if e != nil {
			f(e)
		}
	}
}

func (s *State) forEachInRegion(j *Job, ri int, f func(*Execution)) {
	for _, vi := range j.Regions[ri].Vertices {
		s.forEachInVertex(j, vi, f)
	}
}

func (s *State) applyForget(c *ForgetJobs) Result {
	for _, id := range c.IDs {
		j, ok := s.jobs[id]
		if !ok || !j.Status.Terminal() {
			continue
		}
		next := j.AttemptFloor
		s.forEachCurrent(j, func(e *Execution) {
			next = max(next, e.Attempt+1)
			s.dropPartition(s.partitions[e.ID])
			delete(s.execs, e.ID)
		})
		delete(s.current, id) // nothing of a terminal job is live
		delete(s.jobs, id)
		s.specBytes -= j.Spec.Footprint()
		s.emit(Event{Topic: TopicJob, Type: EventJobForgotten, Time: c.Time, Job: id, State: string(j.Status)})
		s.forgotten[id] = Tombstone{ID: id, Next: next, At: c.Time}
	}
	if c.PruneBefore > 0 {
		for _, id := range sortedKeys(s.forgotten) {
			if s.forgotten[id].At < c.PruneBefore {
				s.pruneTombstone(id)
			}
		}
	}
	return Result{}
}
