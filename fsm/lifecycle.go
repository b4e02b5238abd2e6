package fsm

import (
	"fmt"
	"jobmaster/wire"
)

// regionRestarts begins the message of an execution cancelled because its
// region restarts; the restart's cause follows.
const regionRestarts = "its region restarts: "

// endExecution records a terminal state and lets the job react to it. A
// fenced end (its executor's lease ran out) restarts the region without
// the restart strategy's count.
func (s *State) endExecution(e *Execution, st wire.State, now int64, msg string, fenced bool) {
	wasCanceling := e.State == wire.StateCanceling
	wasLive := !e.State.Terminal()
	e.EndTime = now
	// A cancel the masters asked for keeps their reason, not the
	// executor's word that it cancelled.
	if msg != "" && !(wasCanceling && st == wire.StateCanceled && e.Message != "") {
		e.Message = msg
	}
	s.setExecState(e, st, now)
	s.untrack(e)
	j := s.jobs[e.Job]
	if j == nil {
		return
	}
	if wasLive && st.Terminal() {
		s.ended(regionOf(j, e))
	}
	vi := e.VertexIndex
	if st == wire.StateFinished {
		j.Vertices[vi].Finished++
	}
	if j.Status.Terminal() {
		return
	}
	if j.Status.ending() {
		s.maybeEnd(j, now)
		return
	}
	ri := j.Vertices[vi].Region
	failed := st == wire.StateFailed || (st == wire.StateCanceled && !wasCanceling)
	switch j.Regions[ri].Status {
	case RegionRunning:
		if failed {
			why := msg
			if why == "" {
				why = string(st)
			}
			cause := fmt.Sprintf("%s %s: %s", e.ID, st, why)
			if fenced {
				s.restartRegion(j, ri, ReasonLeaseExpired, cause, now, 0)
				return
			}
			s.handleFailure(j, ri, cause, now)
			return
		}
		if st == wire.StateFinished && s.regionFinished(j, ri) {
			s.setRegionStatus(j, ri, RegionFinished)
			for _, d := range j.Regions[ri].Downstream {
				if j.Regions[d].Status == RegionWaiting && s.upstreamFinished(j, d) {
					s.setRegionStatus(j, d, RegionReady)
				}
			}
			s.refreshActive(j, now)
			s.releaseUnneeded(j)
		}
	case RegionRestarting:
		// The restart waits for every execution of the region to end.
	}
}

func (s *State) regionFinished(j *Job, ri int) bool {
	for _, vi := range j.Regions[ri].Vertices {
		if j.Vertices[vi].Finished < len(j.Vertices[vi].Attempts) {
			return false
		}
	}
	return true
}

// handleFailure asks the job's restart strategy what to do about a failure
// in region ri: fail the job, or cancel what the failover scope covers and
// restart it after the strategy's delay.
func (s *State) handleFailure(j *Job, ri int, cause string, now int64) {
	ok, delay, why := s.decide(j, now)
	if !ok {
		s.stopJob(j, JobFailing, cause+"; "+why, now)
		return
	}
	s.restartRegion(j, ri, s.failCause(), cause, now, delay)
}

// failoverScope returns the regions a failure in region ri restarts: under
// "region", ri and every region downstream of it that has started; under
// "full", every region that has started. Regions still waiting for their
// inputs stay as they are.
func (s *State) failoverScope(j *Job, ri int) []int {
	if j.Spec.Failover == "full" {
		var out []int
		for r := range j.Regions {
			if j.Regions[r].Status != RegionWaiting {
				out = append(out, r)
			}
		}
		return out
	}
	seen := map[int]bool{ri: true}
	out := []int{ri}
	for i := 0; i < len(out); i++ {
		for _, d := range j.Regions[out[i]].Downstream {
			if !seen[d] && j.Regions[d].Status != RegionWaiting {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// refreshActive derives the status of a job that is neither ending nor
// ended from its regions.
func (s *State) refreshActive(j *Job, now int64) {
	if j.Status.Terminal() || j.Status.ending() {
		return
	}
	started, restarting, finished := false, false, true
	for _, r := range j.Regions {
		switch r.Status {
		case RegionRestarting:
			restarting = true
		case RegionRunning, RegionFinished:
			started = true
		}
		if r.Status != RegionFinished {
			finished = false
		}
	}
	switch {
	case finished:
		s.setJobStatus(j, JobFinished)
		j.EndTime = now
		// The message keeps what the job last restarted for, if it did.
	case restarting:
		s.setJobStatus(j, JobRestarting)
	case started || j.Status == JobRestarting:
		s.setJobStatus(j, JobRunning)
	}
}
