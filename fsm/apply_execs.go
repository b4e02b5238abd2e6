package fsm

import (
	"fmt"
	"jobmaster/wire"
)

func (s *State) applyPlace(index uint64, c *PlaceRegion) Result {
	j, ok := s.jobs[c.Job]
	if !ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrNotFound, c.Job)}
	}
	if c.Region < 0 || c.Region >= len(j.Regions) || j.Regions[c.Region].Status != RegionReady {
		return Result{Err: fmt.Errorf("%w: region %d of %q is not ready", ErrRejected, c.Region, c.Job)}
	}
	// assign maps a slot key to its assignment's index in c.Slots.
	assign := make(map[slotKey]int, len(c.Slots))
	taken := make(map[slotRef]bool, len(c.Slots))
	for i, a := range c.Slots {
		k := slotKey{j.ID, a.Group, a.Index}
		ref := slotRef{a.Executor, a.Slot}
		if a.Executor == "" || a.Slot < 0 {
			return Result{Err: fmt.Errorf("%w: bad slot %q/%d", ErrRejected, a.Executor, a.Slot)}
		}
		if _, dup := assign[k]; dup {
			return Result{Err: fmt.Errorf("%w: slot key %s/%d assigned twice", ErrRejected, a.Group, a.Index)}
		}
		if taken[ref] {
			return Result{Err: fmt.Errorf("%w: slot %s/%d assigned twice", ErrRejected, a.Executor, a.Slot)}
		}
		taken[ref] = true
		if use, ok := s.slots[a.Executor][a.Slot]; ok && use.key() != k {
			return Result{Err: fmt.Errorf("%w: slot %s/%d is taken", ErrRejected, a.Executor, a.Slot)}
		}
		if held, ok := s.slotOf.get(k); ok && held != ref {
			return Result{Err: fmt.Errorf("%w: %s/%d is already in slot %s/%d", ErrRejected, a.Group, a.Index, held.executor, held.slot)}
		}
		assign[k] = i
	}
	// Every execution of the region needs its key assigned, and every
	// assignment must be used. The first pass only checks (a rejected
	// placement changes nothing) and notes each execution's assignment in
	// iteration order for the second.
	used := make([]bool, len(c.Slots))
	nused := 0
	which := make([]int, 0, len(c.Slots))
	var missing error
	s.forEachInRegion(j, c.Region, func(e *Execution) {
		if e.State == wire.StateFinished {
			return // kept by a restart that re-runs other subtasks
		}
		i, ok := assign[s.keyOf(j, e)]
		if !ok {
			if missing == nil {
				missing = fmt.Errorf("%w: no slot for %s", ErrRejected, e.ID)
			}
			return
		}
		if e.State != wire.StateScheduled && missing == nil {
			missing = fmt.Errorf("%w: %s is %s", ErrRejected, e.ID, e.State)
		}
		if !used[i] {
			used[i] = true
			nused++
		}
		which = append(which, i)
	})
	if missing != nil {
		return Result{Err: missing}
	}
	if nused != len(assign) {
		return Result{Err: fmt.Errorf("%w: %d slot assignments for %d slot keys", ErrRejected, len(assign), nused)}
	}
	placed := make([]Execution, 0, len(which))
	n := 0
	s.forEachInRegion(j, c.Region, func(e *Execution) {
		if e.State == wire.StateFinished {
			return
		}
		a := &c.Slots[which[n]]
		n++
		e.Executor = s.executorName(a.Executor)
		e.Slot = a.Slot
		s.setExecState(e, wire.StateDeploying, c.Time)
		e.Epoch = c.Token
		e.Deployed = false
		e.DeployIndex = index
		e.DeployTime = c.Time
		// The key as the spec spells it (equal to the assignment's, which
		// matched it): each assignment decoded its own copy of the group's
		// name, which the slot index would otherwise keep.
		s.track(e, s.keyOf(j, e))
		placed = append(placed, *e)
	})
	s.setRegionStatus(j, c.Region, RegionRunning)
	s.refreshActive(j, c.Time)
	return Result{Placed: placed}
}

// executorName returns id, as the string the executor's live executions
// already hold if it has any: each assignment decoded its own copy of the
// name, which a million placed executions would otherwise keep apart.
func (s *State) executorName(id string) string {
	for e := range s.byExecutor[id] {
		return e.Executor
	}
	return id
}

// keyOf is the slot key of an execution.
func (s *State) keyOf(j *Job, e *Execution) slotKey {
	return slotKey{j.ID, j.Spec.Vertices[e.VertexIndex].SlotSharingGroup, e.Subtask}
}

// track adds a placed, live execution to the per-executor and slot indexes.
func (s *State) track(e *Execution, k slotKey) {
	m := s.byExecutor[e.Executor]
	if m == nil {
		m = make(execSet)
		s.byExecutor[e.Executor] = m
	}
	m[e] = struct{}{}
	slots := s.slots[e.Executor]
	if slots == nil {
		slots = make(map[int]slotUse)
		s.slots[e.Executor] = slots
	}
	use, ok := slots[e.Slot]
	if !ok {
		g := s.slotOf.set(k, slotRef{e.Executor, e.Slot}, groupWidth(s.jobs[e.Job], k.group))
		use = slotUse{g: g, index: int32(k.index)}
		s.noteJoinable(k.job)
	}
	use.refs++
	slots[e.Slot] = use
}

// untrack removes an execution that ended from the indexes; the slot is
// free once no live execution uses it.
func (s *State) untrack(e *Execution) {
	if c := s.canceling[e.Executor]; c != nil {
		delete(c, e.ID)
		if len(c) == 0 {
			delete(s.canceling, e.Executor)
		}
	}
	m := s.byExecutor[e.Executor]
	if _, ok := m[e]; !ok {
		return
	}
	delete(m, e)
	if len(m) == 0 {
		delete(s.byExecutor, e.Executor)
	}
	slots := s.slots[e.Executor]
	if use, ok := slots[e.Slot]; ok {
		if use.refs--; use.refs > 0 {
			slots[e.Slot] = use
			return
		}
		delete(slots, e.Slot)
		s.slotOf.del(use.key())
		s.noteJoinable(use.g.job)
		if len(slots) == 0 {
			delete(s.slots, e.Executor)
		}
	}
}

func (s *State) applyReport(index uint64, c *ReportExecutions) Result {
	var terminal []string
	for _, u := range c.Updates {
		e := s.execs[u.ID]
		if e == nil || e.Executor != c.Executor || e.State == wire.StateScheduled {
			// Not (or no longer) expected on this executor: its terminal
			// state needs no recording. The leader cancels live ones.
			if u.State.Terminal() && (e == nil || e.State.Terminal()) {
				terminal = append(terminal, u.ID)
			}
			continue
		}
		if !u.State.Valid() {
			continue
		}
		if !e.Deployed && !e.State.Terminal() {
			e.Deployed = true
			e.AckIndex = index
		}
		switch {
		case e.State.Terminal():
		case u.State.Terminal():
			if j := s.jobs[e.Job]; u.State == wire.StateFinished && j != nil && !j.Status.Terminal() && !j.Status.ending() && hasConsumers(j, e.VertexIndex) {
				s.trackPartition(e, u.Bytes, index)
			}
			st := u.State
			fenced := st == wire.StateCanceled && u.Fenced
			switch {
			case fenced:
				s.setFailCause(ReasonLeaseExpired)
			case st == wire.StateCanceled:
				s.setFailCause(ReasonTaskCanceled)
			default:
				s.setFailCause(ReasonTaskFailed)
			}
			if st == wire.StateFailed && len(u.Unavailable) > 0 {
				if e.State == wire.StateCanceling {
					// Its input was released because it is being
					// cancelled: the cancel is what ended it.
					st = wire.StateCanceled
				} else {
					s.unavailable(e, u.Unavailable, c.Time, u.Message)
				}
			}
			s.endExecution(e, st, c.Time, u.Message, fenced)
		case u.State == wire.StateRunning && e.State == wire.StateDeploying:
			e.StartTime = c.Time
			s.setExecState(e, wire.StateRunning, c.Time)
		}
		if u.State.Terminal() && e.State.Terminal() {
			terminal = append(terminal, u.ID)
		}
	}
	return Result{Terminal: terminal}
}

func (s *State) applyFail(c *FailExecutions) Result {
	for _, id := range c.IDs {
		e := s.execs[id]
		if e == nil || e.Executor != c.Executor || e.State.Terminal() || e.State == wire.StateScheduled {
			continue
		}
		// Only a deployed execution can be missing; a pending one failed
		// because its deployment expired.
		if e.Deployed {
			s.setFailCause(ReasonMissing)
		} else {
			s.setFailCause(ReasonDeployExpired)
		}
		s.failOrCancel(e, c.Time, c.Reason)
	}
	return Result{}
}

func (s *State) applyExecutorLost(c *ExecutorLost) Result {
	s.emit(Event{Topic: TopicExecutor, Type: EventExecutorStatus, Time: c.Time, Executor: c.Executor, State: ExecutorLostStatus})
	// One event: a job restarts for it once under its strategy, whatever
	// of it was there.
	s.event = make(map[string]eventDecision)
	defer func() { s.event = nil }()
	// The executions first: what ran there failed because the executor
	// was lost (and says so); then the partitions, whose loss is part of
	// the same restart.
	s.setFailCause(ReasonExecutorLost)
	reason := fmt.Sprintf("executor %s lost", c.Executor)
	for _, x := range s.byExecutor[c.Executor].sorted() {
		if e := s.execs[x.ID]; e != nil && !e.State.Terminal() {
			s.failOrCancel(e, c.Time, reason)
		}
	}
	s.losePartitions(s.partitionsOn(c.Executor), c.Time, "lost with executor "+c.Executor, c.Executor)
	return Result{}
}

// failOrCancel ends an execution that is gone from its executor: CANCELED if
// it was being cancelled anyway, FAILED otherwise.
func (s *State) failOrCancel(e *Execution, now int64, reason string) {
	if e.State == wire.StateCanceling {
		s.endExecution(e, wire.StateCanceled, now, reason, false)
		return
	}
	s.endExecution(e, wire.StateFailed, now, reason, false)
}

func (s *State) applyRestart(c *RestartRegions) Result {
	j, ok := s.jobs[c.Job]
	if !ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrNotFound, c.Job)}
	}
	if j.Status.Terminal() || j.Status.ending() {
		return Result{}
	}
	for ri := range j.Regions {
		if !s.restartDue(j, ri, c.Time) {
			continue
		}
		s.touchJob(j, false)
		s.newAttempts(j, ri, true, c.Time)
		j.Restarts++
	}
	s.refreshActive(j, c.Time)
	return Result{}
}

// restartDue reports whether a restarting region may restart at now: its
// delay has passed and every execution of every restarting region of the
// job has ended. Regions that fail together (a full failover, or a region
// and its downstream) thus restart together, and no new attempt starts
// while an old one of the same job is still being cancelled, possibly in
// the same slot.
func (s *State) restartDue(j *Job, ri int, now int64) bool {
	r := &j.Regions[ri]
	if r.Status != RegionRestarting || r.RestartAt > now {
		return false
	}
	for rj := range j.Regions {
		if j.Regions[rj].Status != RegionRestarting {
			continue
		}
		if s.regionLive(j, rj) {
			return false
		}
	}
	return true
}
