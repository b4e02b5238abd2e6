package master

import (
	"time"
)

// schedulePause bounds how often the scheduler re-plans when the FSM
// changes quickly: it coalesces a burst of submissions into one plan.
const schedulePause = 5 * time.Millisecond

// schedule places ready regions whenever something may have made room or
// work: a kick (slots freed, an executor answered), an FSM change, or a
// periodic tick. The core plans (leader.Core.Schedule); the placements are
// committed in one entry and the executions the FSM accepted are deployed.
func (s *session) schedule() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		changed := s.m.fsm.Changed()
		if plan := s.tracker.core.Schedule(s.tracker.read, s.m.cfg.Now()); len(plan.Propose) > 0 {
			s.tracker.carry(plan.Ready, sendEach)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.kickSchedule:
		case <-changed:
		case <-tick.C:
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(schedulePause):
		}
	}
}

// restarts proposes the restart of every region whose restart delay has
// passed and whose executions have all ended, and waits for the next one
// due (at most a second) or a change of the state.
func (s *session) restarts() {
	for {
		changed := s.m.fsm.Changed()
		now := s.m.cfg.Now()
		r, next := s.tracker.core.Restarts(s.tracker.read, now)
		if len(r.Propose) > 0 {
			s.tracker.carry(r, sendNow)
		}
		wait := time.Second
		if d := next.Sub(now); !next.IsZero() && d > 0 && d < wait {
			wait = d
		}
		timer := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			timer.Stop()
			return
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// collectGarbage forgets jobs that ended more than JobRetention ago, a
// bounded batch at a time (leader.Core.Forget).
func (s *session) collectGarbage() {
	retention := s.m.cfg.JobRetention
	if retention <= 0 {
		return
	}
	// A quarter of the retention, at most a minute, at least 10 ms (a
	// retention of a few nanoseconds is legal: forget at once).
	tick := time.NewTicker(max(min(retention/4, time.Minute), 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		if r := s.tracker.core.Forget(s.tracker.read, s.m.cfg.Now(), retention); len(r.Propose) > 0 {
			s.tracker.carry(r, sendNow)
		}
	}
}
