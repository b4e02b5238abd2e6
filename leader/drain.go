package leader

import (
	"log/slog"
	"sort"
	"time"

	"jobmaster/fsm"
)

// Drains decides, at now, what the drains need (fsm/drain.go): the work of
// every draining executor whose deadline has passed is moved
// (move-executor), and a drain that an executor asked for itself ends once
// another instance of it answers heartbeats (it was restarted: the drain
// was for the run that stopped).
func (c *Core) Drains(read Reader, now time.Time) Ready {
	var move []string
	var self []fsm.Drain
	early := make(map[string]bool)
	read(func(st *fsm.State) {
		move = st.ToMove(now.UnixMilli())
		for _, d := range st.Drains() {
			if d.Self {
				self = append(self, d)
			}
			early[d.Executor] = d.Deadline > now.UnixMilli()
		}
	})
	var r Ready
	f := c.fenced(now)
	for _, ex := range move {
		r.Propose = append(r.Propose, &fsm.MoveExecutor{Fenced: f, Executor: ex})
		if early[ex] {
			r.event(slog.LevelInfo, "drain: nothing runs on the executor and its partitions have been read: dropping them", "executor", ex)
		} else {
			r.event(slog.LevelInfo, "drain deadline passed: moving the executor's work", "executor", ex)
		}
	}
	var ended []string
	c.mu.Lock()
	for _, d := range self {
		if x := c.execs[d.Executor]; x != nil && x.answered && x.instance != "" && x.instance != d.Instance {
			ended = append(ended, d.Executor)
			r.Propose = append(r.Propose, &fsm.UndrainExecutor{Fenced: f, Executor: d.Executor, Instance: x.instance})
		}
	}
	c.mu.Unlock()
	sort.Strings(ended)
	for _, ex := range ended {
		r.event(slog.LevelInfo, "executor restarted: the drain it asked for ends", "executor", ex)
	}
	r.kickOnCommit = len(r.Propose) > 0
	return r
}
