package leader

import (
	"log/slog"
	"sort"
	"time"

	"jobmaster/fsm"
)

// Status is an executor's liveness as the leader judges it from heartbeats;
// GET /v1/cluster shows it.
type Status string

// Liveness statuses.
const (
	Alive   Status = "alive"
	Suspect Status = "suspect"
	Lost    Status = "lost"
)

// Liveness classifies an executor by the time since its last answered
// heartbeat: alive within two intervals, lost after timeout, suspect in
// between. Only a lost executor's executions are failed.
func Liveness(now, lastAnswer time.Time, interval, timeout time.Duration) Status {
	since := now.Sub(lastAnswer)
	switch {
	case since >= timeout:
		return Lost
	case since > 2*interval:
		return Suspect
	}
	return Alive
}

// pauseFactor: a tick that comes more than this many heartbeat intervals
// after the previous one means this process was paused (or starved).
const pauseFactor = 3

// Tick judges every executor's liveness at now, and proposes executor-lost
// for each newly lost executor that has work. A tick long after the
// previous one means the leader itself was paused: executors could not have
// answered meanwhile, so their silence proves nothing and every timeout
// starts again.
func (c *Core) Tick(read Reader, now time.Time) Ready {
	var r Ready
	c.mu.Lock()
	if gap := now.Sub(c.lastTick); gap > pauseFactor*c.cfg.Heartbeat {
		r.event(slog.LevelWarn, "leader was paused; restarting executor timeouts", "gap", gap)
		for _, x := range c.execs {
			if x.lastAnswer.Before(now) {
				x.lastAnswer = now
			}
		}
	}
	c.lastTick = now
	var lost []string
	for _, x := range c.execs {
		st := Liveness(now, x.lastAnswer, c.cfg.Heartbeat, c.cfg.Timeout)
		if st != x.status {
			r.Changes = append(r.Changes, Change{Executor: x.id, From: x.status, To: st, Silent: now.Sub(x.lastAnswer)})
			x.status = st
		}
		if st == Lost && !x.lostSent {
			lost = append(lost, x.id)
		}
	}
	c.mu.Unlock()
	sort.Slice(r.Changes, func(i, j int) bool { return r.Changes[i].Executor < r.Changes[j].Executor })
	if len(lost) == 0 {
		return r
	}
	sort.Strings(lost)
	withWork := make(map[string]bool)
	read(func(st *fsm.State) {
		for _, id := range st.ExecutorsWithWork() {
			withWork[id] = true
		}
	})
	for _, id := range lost {
		if withWork[id] {
			r.Propose = append(r.Propose, &fsm.ExecutorLost{Fenced: c.fenced(now), Executor: id})
		}
	}
	if len(r.Propose) == 0 {
		// Nothing to fail: the loss needs no command.
		c.markLost(lost)
		return r
	}
	r.lost = lost
	r.kickOnCommit = true
	return r
}

// markLost records that the loss of the executors ids is committed (or
// needed no command). One that answered since the tick that found it lost
// is alive again: a later loss, with the work it may have taken since,
// needs its own executor-lost.
func (c *Core) markLost(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if x := c.execs[id]; x != nil && x.status == Lost {
			x.lostSent = true
		}
	}
}
