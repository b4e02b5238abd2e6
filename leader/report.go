package leader

import (
	"log/slog"
	"maps"
	"sort"
	"time"

	"jobmaster/fsm"
	"jobmaster/reconcile"
	"jobmaster/wire"
)

// Partial handles a partial report received at now: a push of state
// changes (with the partitions it lists, if any), or the answer to a
// deploy. Only the executions it names are compared, so nothing can be
// missing from it.
func (c *Core) Partial(read Reader, executor string, reported []wire.ExecutionStatus, partitions []wire.Partition, now time.Time) Ready {
	c.mu.Lock()
	var early map[string]bool
	if x := c.execs[executor]; x != nil {
		early = x.noteEarlyStops(reported)
	} else {
		early = stopsIn(reported, nil)
	}
	c.mu.Unlock()
	return c.report(read, executor, reported, partitions, 0, now, now, true, early)
}

// noteEarlyStops remembers, until this leader has renewed x's lease once,
// the executions x reports stopping or stopped: x stopped them before this
// leader held its lease, so a lease of x's that ran out then ran out for
// want of a leader (the masters had none, or another leader was failing
// over), no fault of the task's nor of x's. Once this leader has renewed
// x's lease, a lease that runs out is x's (or its network's) doing: frozen,
// cut off while this leader heartbeats it; it counts as a failure. It
// returns the executions so stopped. Call with c.mu held.
func (x *executor) noteEarlyStops(reported []wire.ExecutionStatus) map[string]bool {
	if !x.renewed {
		x.earlyStops = stopsIn(reported, x.earlyStops)
	}
	return maps.Clone(x.earlyStops) // read by report without c.mu
}

// stopsIn adds to m (made if nil and needed) the executions reported
// CANCELING or CANCELED.
func stopsIn(reported []wire.ExecutionStatus, m map[string]bool) map[string]bool {
	for _, r := range reported {
		if r.State == wire.StateCanceling || r.State == wire.StateCanceled {
			if m == nil {
				m = make(map[string]bool)
			}
			m[r.ExecutionID] = true
		}
	}
	return m
}

// forgetEarlyStops drops from x's early stops the executions whose end is
// recorded (ids). Call with c.mu held.
func (x *executor) forgetEarlyStops(ids []string) {
	for _, id := range ids {
		delete(x.earlyStops, id)
	}
}

// report reconciles a report taken at asOf (with the state at index base
// then) against the executions and partitions expected on the executor,
// and turns the verdicts into a Ready: the commands recording it, the
// cancels of unknown and cancelling executions, the redeployments of
// pending ones, the releases of partitions nobody needs, the acks.
// early: the executions the executor stopped before this leader renewed
// its lease (executor.noteEarlyStops).
func (c *Core) report(read Reader, executor string, reported []wire.ExecutionStatus, partitions []wire.Partition, base uint64, asOf, now time.Time, partial bool, early map[string]bool) Ready {
	r := Ready{Executor: executor}
	c.reportPartitions(read, &r, executor, partitions, base, now, partial)
	var expected []fsm.Execution
	if partial {
		ids := make([]string, len(reported))
		for i := range reported {
			ids[i] = reported[i].ExecutionID
		}
		read(func(st *fsm.State) { expected = st.ExpectedAmong(executor, ids) })
	} else {
		read(func(st *fsm.State) { expected = st.Expected(executor) })
	}
	res := reconcile.Reconcile(reconcile.Input{
		Executor: executor, Expected: expected, Reported: reported, Partial: partial,
		BaseIndex: base, Now: asOf.UnixMilli(), AckDeadline: c.cfg.AckDeadline, StoppedEarly: early,
	})
	if len(early) > 0 {
		ended := append([]string(nil), res.Ack...) // terminal, not expected: never recorded
		for _, u := range res.Record {
			if u.State.Terminal() {
				ended = append(ended, u.ID)
			}
		}
		c.mu.Lock()
		if x := c.execs[executor]; x != nil {
			x.forgetEarlyStops(ended)
		}
		c.mu.Unlock()
	}
	if res.Empty() {
		return r
	}
	for i := range res.Record {
		if u := &res.Record[i]; len(u.Unavailable) > 0 {
			read(func(st *fsm.State) { u.Unavailable = st.UnavailableInputs(u.ID, u.Unavailable) })
		}
	}
	r.Ack = res.Ack
	r.Tally.UnknownCancelled += len(res.Unknown)
	r.pending.MissingFailed += len(res.Missing)
	r.pending.DeploysExpired += len(res.Expired)
	r.Propose = append(reconcile.Commands(executor, res, c.token, now.UnixMilli(), c.cfg.AckDeadline), r.Propose...)
	r.kickOnCommit = len(r.Propose) > 0
	if len(res.Cancel) > 0 {
		r.event(slog.LevelInfo, "cancelling executions", "executor", executor, "count", len(res.Cancel), "executions", firstIDs(res.Cancel))
		r.Cancel = append(r.Cancel, Cancel{Executor: executor, IDs: res.Cancel})
	}
	if len(res.Redeploy) > 0 {
		d := Deploy{Executor: executor, Redeploy: true}
		read(func(st *fsm.State) {
			// Built as a placement's: each vertex's edges once.
			st.EachTaskSpecOf(res.Redeploy, func(ts *fsm.TaskSpec) { d.Tasks = append(d.Tasks, *ts) })
		})
		if len(d.Tasks) > 0 {
			r.Deploy = append(r.Deploy, d)
			r.Tally.Redeployed += len(d.Tasks)
		}
	}
	return r
}

// reportPartitions reconciles the partitions a report lists (every one the
// executor holds, for a full report) against those the state tracks there:
// it adds to r the releases of untracked ones and the lose-partitions
// command for tracked ones the executor no longer holds.
func (c *Core) reportPartitions(read Reader, r *Ready, executor string, partitions []wire.Partition, base uint64, now time.Time, partial bool) {
	if partial && len(partitions) == 0 {
		return
	}
	var res reconcile.PartitionResult
	read(func(st *fsm.State) {
		res = reconcile.Partitions(reconcile.PartitionInput{Tracked: st.PartitionsOn(executor), Reported: partitions,
			Partial: partial, BaseIndex: base, ProducerLive: st.ProducerLive})
	})
	if len(res.Release) > 0 {
		r.Release = append(r.Release, Release{Executor: executor, IDs: res.Release})
		r.Tally.PartitionsReleased += len(res.Release)
	}
	if len(res.Lost) > 0 {
		r.pending.PartitionsLost += len(res.Lost)
		r.Propose = append(r.Propose, &fsm.LosePartitions{Fenced: c.fenced(now), Executor: executor, IDs: res.Lost,
			Reason: "no longer held by executor " + executor})
		r.kickOnCommit = true
	}
}

// Cancels returns a cancel for every execution the state has just marked
// CANCELING on a known executor, without waiting for its next report. Each
// is sent once; reports repeat it while the executor still runs it.
func (c *Core) Cancels(read Reader) Ready {
	var canceling map[string][]string
	read(func(st *fsm.State) { canceling = st.Canceling() })
	c.mu.Lock()
	defer c.mu.Unlock()
	var r Ready
	for _, x := range c.execs {
		ids := canceling[x.id]
		now := make(map[string]bool, len(ids))
		var todo []string
		for _, id := range ids {
			now[id] = true
			if !x.cancelSent[id] {
				todo = append(todo, id)
			}
		}
		x.cancelSent = now
		if len(todo) > 0 {
			r.Cancel = append(r.Cancel, Cancel{Executor: x.id, IDs: todo})
		}
	}
	sort.Slice(r.Cancel, func(i, j int) bool { return r.Cancel[i].Executor < r.Cancel[j].Executor })
	return r
}

// logIDs is how many ids a log line lists: a report can name thousands.
const logIDs = 20

// firstIDs returns at most logIDs of ids, for a log line (count says how
// many there are).
func firstIDs(ids []string) []string {
	if len(ids) <= logIDs {
		return ids
	}
	return ids[:logIDs]
}
