package fsm

import (
	"fmt"
	"sort"
	"time"

	"jobmaster/wire"
)

// Drains (docs/architecture.md, "Draining an executor").
//
// A draining executor takes no new work. What runs there may go on until
// the drain's deadline; then the leader proposes move-executor, and every
// live execution there is cancelled and its region restarts elsewhere at
// once, and every partition held there that a consumer has yet to read is
// produced again elsewhere. Neither counts against the job's restart
// strategy: no failure happened. Before the deadline the move comes as
// soon as it costs nothing: once nothing runs there and every partition
// there has been read by all its consumers (kept only for their restarts,
// it is dropped, and produced again only if one restarts). An executor is
// drained once it drains and holds nothing a job still needs: no live
// execution, no tracked partition.
//
// Undraining makes it eligible for work again. A drain the executor asked
// for itself (Self, on SIGTERM) names the executor's instance: the leader
// ends it when another instance of the executor answers (it was restarted).

// Drain is an executor's drain.
type Drain struct {
	Executor string `codec:"e"`
	// Since is when the drain began (unix ms), Deadline when what still
	// runs there is moved.
	Since    int64 `codec:"s"`
	Deadline int64 `codec:"d"`
	// Moved: the deadline passed and move-executor moved its work.
	Moved bool `codec:"m,omitempty"`
	// Self: the executor asked for it (Instance is which run of it).
	Self     bool   `codec:"self,omitempty"`
	Instance string `codec:"inst,omitempty"`
}

// MaxDrainDeadline bounds a drain's deadline.
const MaxDrainDeadline int64 = 30 * 24 * 3600 * 1000

// DrainExecutor starts (or changes) the drain of an executor: it takes no
// new work, and what runs there DeadlineMs after the command's time is
// moved. Draining a draining executor again sets its deadline anew.
type DrainExecutor struct {
	Fenced
	Executor   string `codec:"e"`
	DeadlineMs int64  `codec:"d"`
	Self       bool   `codec:"self,omitempty"`
	Instance   string `codec:"inst,omitempty"`
}

// UndrainExecutor ends an executor's drain: it is eligible for work again.
// Instance, when set, ends the drain only if it is a self-drain of another
// instance than this one (the leader's rule for a restarted executor).
type UndrainExecutor struct {
	Fenced
	Executor string `codec:"e"`
	Instance string `codec:"inst,omitempty"`
}

// MoveExecutor moves the work off a draining executor whose deadline has
// passed: its live executions are cancelled, their regions restarted
// elsewhere, and the partitions it holds that consumers have yet to read
// produced again elsewhere, none of it counted by the restart strategies.
// Before the deadline it applies only if the move costs nothing (ErrNotDue
// otherwise): see FreeToMove.
type MoveExecutor struct {
	Fenced
	Executor string `codec:"e"`
}

func (*DrainExecutor) Type() CommandType   { return TypeDrainExecutor }
func (*UndrainExecutor) Type() CommandType { return TypeUndrainExecutor }
func (*MoveExecutor) Type() CommandType    { return TypeMoveExecutor }

// ErrNotDraining: the executor is not draining (move-executor, undrain).
var ErrNotDraining = fmt.Errorf("executor is not draining")

// ErrNotDue: a move-executor before the drain's deadline would cost
// something (work runs there, or a consumer has yet to read a partition
// there); it waits for the deadline.
var ErrNotDue = fmt.Errorf("drain deadline not reached and work is left to move")

// Executor statuses an EventExecutorStatus carries for drains.
const (
	ExecutorDrainingStatus = "draining"
	ExecutorEligibleStatus = "eligible"
	ExecutorMovedStatus    = "moved"
)

func (s *State) applyDrain(c *DrainExecutor) Result {
	if c.Executor == "" || c.DeadlineMs < 0 || c.DeadlineMs > MaxDrainDeadline {
		return Result{Err: fmt.Errorf("bad drain of %q with deadline %d ms", c.Executor, c.DeadlineMs)}
	}
	d := s.drains[c.Executor]
	if d == nil {
		d = &Drain{Executor: c.Executor, Since: c.Time}
		s.drains[c.Executor] = d
	}
	d.Deadline = c.Time + c.DeadlineMs
	d.Self, d.Instance = c.Self, c.Instance
	s.emit(Event{Topic: TopicExecutor, Type: EventExecutorStatus, Time: c.Time, Executor: c.Executor, State: ExecutorDrainingStatus,
		Message: "draining, deadline in " + (time.Duration(c.DeadlineMs) * time.Millisecond).String()})
	return Result{Created: true}
}

func (s *State) applyUndrain(c *UndrainExecutor) Result {
	d := s.drains[c.Executor]
	if d == nil {
		return Result{Err: fmt.Errorf("%w: %q", ErrNotDraining, c.Executor)}
	}
	if c.Instance != "" && (!d.Self || d.Instance == c.Instance) {
		return Result{Unchanged: true}
	}
	delete(s.drains, c.Executor)
	s.emit(Event{Topic: TopicExecutor, Type: EventExecutorStatus, Time: c.Time, Executor: c.Executor, State: ExecutorEligibleStatus})
	return Result{}
}

func (s *State) applyMove(c *MoveExecutor) Result {
	d := s.drains[c.Executor]
	if d == nil {
		return Result{Err: fmt.Errorf("%w: %q", ErrNotDraining, c.Executor)}
	}
	if c.Time < d.Deadline && !s.FreeToMove(c.Executor) {
		// Proposed as free, but something changed before it applied.
		return Result{Err: fmt.Errorf("%w: %q", ErrNotDue, c.Executor)}
	}
	d.Moved = true
	cause := "moved off draining executor " + c.Executor
	s.emit(Event{Topic: TopicExecutor, Type: EventExecutorStatus, Time: c.Time, Executor: c.Executor, State: ExecutorMovedStatus})
	here := s.byExecutor[c.Executor].sorted()
	var live []*Execution // here, and not stopping yet
	for _, x := range here {
		if e := s.execs[x.ID]; e != nil && !e.State.Terminal() && e.State != wire.StateCanceling {
			live = append(live, e)
		}
	}
	// Partitions first, as when an executor is lost: a job that needed one
	// restarts its consumers once, which may cancel executions here too.
	s.loseFreely(s.partitionsOn(c.Executor), c.Time, cause, c.Executor)
	for _, x := range here {
		e := s.execs[x.ID]
		if e == nil || e.State.Terminal() || e.State == wire.StateCanceling {
			continue
		}
		j := s.jobs[e.Job]
		if j == nil || j.Status.Terminal() || j.Status.ending() {
			s.cancelExecution(e, c.Time, cause)
			continue
		}
		ri := j.Vertices[e.VertexIndex].Region
		if j.Regions[ri].Status != RegionRunning {
			s.cancelExecution(e, c.Time, cause)
			continue
		}
		s.restartRegion(j, ri, ReasonDrain, fmt.Sprintf("%s %s", e.ID, cause), c.Time, 0)
	}
	// Whatever restart stopped them (a region's, a partition's), the
	// executions here that this move stopped say it moved them.
	for _, e := range live {
		if e.State == wire.StateCanceling {
			e.Message = cause
		}
	}
	return Result{}
}

// restartRegion restarts region ri of job j, with its failover scope,
// after delay, for cause, a restart of the given kind: its executions are
// cancelled, and the region is placed again once they have ended. Called
// for a failure once the restart strategy allowed it (handleFailure), or
// at once, uncounted, for a cause that is no failure of the job's (a
// drain's move, a lease's expiry).
func (s *State) restartRegion(j *Job, ri int, kind, cause string, now, delay int64) {
	s.announceRestart(j, kind, cause, now)
	set := make(map[int]bool)
	for _, r := range s.failoverScope(j, ri) {
		set[r] = true
	}
	s.restartScope(j, set, nil, now, delay, regionRestarts+cause)
}

// loseFreely drops partitions moved off a draining executor (gone): those
// still needed are produced again at once, without asking the restart
// strategy.
func (s *State) loseFreely(ps []*Partition, now int64, why, gone string) {
	s.losePartitionsAs(ps, now, why, ending{executor: gone}, true)
}

// Draining reports whether an executor drains.
func (s *State) Draining(executor string) bool {
	_, ok := s.drains[executor]
	return ok
}

// DrainOf returns an executor's drain.
func (s *State) DrainOf(executor string) (Drain, bool) {
	d, ok := s.drains[executor]
	if !ok {
		return Drain{}, false
	}
	return *d, true
}

// DrainingSet is the set of draining executors (nil: none).
func (s *State) DrainingSet() map[string]bool {
	if len(s.drains) == 0 {
		return nil
	}
	out := make(map[string]bool, len(s.drains))
	for ex := range s.drains {
		out[ex] = true
	}
	return out
}

// DrainStatus is, per draining executor, whether it is drained (nil:
// none drains).
func (s *State) DrainStatus() map[string]bool {
	if len(s.drains) == 0 {
		return nil
	}
	out := make(map[string]bool, len(s.drains))
	for ex := range s.drains {
		out[ex] = s.Drained(ex)
	}
	return out
}

// Drains lists every drain, in executor order.
func (s *State) Drains() []Drain {
	out := make([]Drain, 0, len(s.drains))
	for _, id := range sortedKeys(s.drains) {
		out = append(out, *s.drains[id])
	}
	return out
}

// Drained reports whether a draining executor holds nothing that a job
// still needs: no live execution and no tracked partition.
func (s *State) Drained(executor string) bool {
	if _, ok := s.drains[executor]; !ok {
		return false
	}
	return len(s.byExecutor[executor]) == 0 && len(s.partsOn[executor]) == 0
}

// ToMove lists the draining executors whose work is to be moved at now
// (unix ms): those whose deadline has passed and that still have work to
// move (a live execution not being cancelled, or a tracked partition),
// and, before the deadline, those that hold partitions and are free to
// move (FreeToMove). In executor order.
func (s *State) ToMove(now int64) []string {
	var out []string
	for ex, d := range s.drains {
		if d.Deadline > now {
			if len(s.partsOn[ex]) > 0 && s.FreeToMove(ex) {
				out = append(out, ex)
			}
			continue
		}
		if len(s.partsOn[ex]) > 0 || s.runsOn(ex) {
			out = append(out, ex)
		}
	}
	sort.Strings(out)
	return out
}

// runsOn reports whether an execution on executor ex lives and is not
// being cancelled.
func (s *State) runsOn(ex string) bool {
	for e := range s.byExecutor[ex] {
		if e.State != wire.StateCanceling {
			return true
		}
	}
	return false
}

// FreeToMove reports whether moving the work off executor ex would cost
// nothing: no execution there lives (but for those being cancelled), and
// no partition there has a consumer yet to read it, so the move restarts
// nothing and drops partitions kept only for consumers' restarts. A
// consumer that runs has read its blocking inputs whole (see readers).
func (s *State) FreeToMove(ex string) bool {
	if s.runsOn(ex) {
		return false
	}
	byJob := make(map[string][]*Partition)
	for _, p := range s.partsOn[ex] {
		byJob[p.Job] = append(byJob[p.Job], p)
	}
	for id, ps := range byJob {
		j := s.jobs[id]
		if j == nil {
			continue
		}
		rd := s.newReaders(j, ending{executor: ex})
		for _, p := range ps {
			if rd.needed(p) && rd.unread(p) {
				return false
			}
		}
	}
	return true
}
