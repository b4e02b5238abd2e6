package master

import (
	"time"

	"jobmaster/fsm"
	"jobmaster/placement"
)

// schedulePause bounds how often the scheduler re-plans when the FSM
// changes quickly: it coalesces a burst of submissions into one plan.
const schedulePause = 5 * time.Millisecond

// schedule places ready regions whenever something may have made room or
// work: a kick (slots freed, an executor answered), an FSM change, or a
// periodic tick.
func (s *session) schedule() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		changed := s.m.fsm.Changed()
		s.schedulePass()
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

// schedulePass plans from the current state, commits the placements in one
// entry, and deploys what the FSM accepted.
func (s *session) schedulePass() {
	// Nothing to plan without a free slot: jobs queued for slots cost a
	// count per executor, not a pass (with thousands queued, listing and
	// ordering them on every submission took half the leader's CPU).
	var inUse map[string]int
	s.m.fsm.Read(func(st *fsm.State) {
		if st.HasReady() {
			inUse = st.SlotsInUse()
		}
	})
	if inUse == nil || s.tracker.freeSlots(inUse) == 0 {
		return
	}
	var ready []fsm.ReadyRegion
	var used map[string][]int
	s.m.fsm.Read(func(st *fsm.State) {
		ready = st.ReadyRegions()
		used = st.UsedSlots()
	})
	if len(ready) == 0 {
		return
	}
	plan := placement.Plan(ready, s.tracker.schedulable(used))
	if len(plan) == 0 {
		return
	}
	f := s.fenced()
	cmds := make([]fsm.Command, len(plan))
	for i, p := range plan {
		cmds[i] = p.Command(f.Token, f.Time)
	}
	rs, err := s.propose(cmds...)
	if err != nil {
		s.m.log.Debug("placement not committed", "err", err)
		return
	}
	var placed []fsm.Execution
	for _, r := range rs {
		if r.Err != nil {
			s.m.log.Debug("placement rejected", "err", r.Err)
			continue
		}
		placed = append(placed, r.Placed...)
	}
	byExecutor := make(map[string][]fsm.TaskSpec)
	s.m.fsm.Read(func(st *fsm.State) {
		for _, ts := range st.TaskSpecs(placed) {
			byExecutor[ts.Execution.Executor] = append(byExecutor[ts.Execution.Executor], ts)
		}
	})
	s.tracker.deploy(byExecutor)
}

// restarts proposes the restart of every region whose restart delay has
// passed and whose executions have all ended.
func (s *session) restarts() {
	for {
		changed := s.m.fsm.Changed()
		now := s.m.cfg.Now()
		var due []string
		var next int64
		s.m.fsm.Read(func(st *fsm.State) {
			due = st.RestartsDue(now.UnixMilli())
			next = st.NextRestart()
		})
		if len(due) > 0 {
			cmds := make([]fsm.Command, len(due))
			f := s.fenced()
			for i, j := range due {
				cmds[i] = &fsm.RestartRegions{Fenced: f, Job: j}
			}
			if _, err := s.propose(cmds...); err == nil {
				s.m.log.Info("restarting", "jobs", due)
				s.kick()
			}
		}
		wait := time.Second
		if d := time.Duration(next-now.UnixMilli()) * time.Millisecond; next != 0 && d > 0 && d < wait {
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
// bounded batch at a time.
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
		cutoff := s.m.cfg.Now().Add(-retention).UnixMilli()
		var ids []string
		var tombs bool
		s.m.fsm.Read(func(st *fsm.State) {
			ids = st.EndedBefore(cutoff, 1000)
			oldest := st.OldestTombstone()
			tombs = oldest != 0 && oldest < cutoff
		})
		if len(ids) == 0 && !tombs {
			continue
		}
		// Tombstones go after another retention: by then no executor still
		// holds an execution of the forgotten job.
		cmd := &fsm.ForgetJobs{Fenced: s.fenced(), IDs: ids, PruneBefore: cutoff}
		if _, err := s.propose(cmd); err == nil && len(ids) > 0 {
			s.m.log.Info("forgot ended jobs", "jobs", len(ids), "retention", retention)
		}
	}
}
