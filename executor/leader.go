package executor

import (
	"fmt"
	"net/http"
	"time"

	"jobmaster/wire"
)

// requestError is a leader request refused: an HTTP status and its body.
type requestError struct {
	code int
	body any
}

func refuse(code int, format string, args ...any) *requestError {
	return &requestError{code: code, body: wire.Error{Error: fmt.Sprintf(format, args...)}}
}

// refuseStaleLocked is the answer to leader l, whose fencing token is
// stale for why (admitFence): a 409 with a StaleToken body, counted and
// logged.
func (e *Executor) refuseStaleLocked(l wire.Leader, why string) *requestError {
	e.metrics.refusals.WithLabelValues(refusedLeader).Inc()
	e.log.Warn("refused a request from a stale leader", "leader", l.Node, "cluster", l.Cluster, "token", l.Token, "reason", why)
	return &requestError{code: http.StatusConflict, body: wire.StaleToken{
		Error: fmt.Sprintf("executor %s refuses leader %s: %s", e.cfg.NodeID, l.Node, why),
		Token: e.fence.Token,
	}}
}

// refuseStale is a look at leader l's fencing token before its request is
// expanded into work: a 409 for a stale one, else nil. It decides nothing
// for good: the request is admitted (admitRenewLocked) when it is acted on.
func (e *Executor) refuseStale(l wire.Leader) *requestError {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, stale, why := admitFence(e.fence, l.Cluster, l.Token); stale {
		return e.refuseStaleLocked(l, why)
	}
	return nil
}

// admitRenewLocked decides whether to act on a request from leader l at
// now. It checks the lease before anything else (an executor that was frozen
// past its lease fences itself before it renews), then the fencing token
// (persisting a newer one first), and renews the lease if renew: only a
// heartbeat that is not a probe does. The returned ids must be stopped (the
// lease expired) whatever the verdict.
func (e *Executor) admitRenewLocked(now time.Time, l wire.Leader, renew bool) (stop []string, rerr *requestError) {
	if e.phase != phaseRunning {
		return nil, refuse(http.StatusServiceUnavailable, "executor %s is shutting down", e.cfg.NodeID)
	}
	stop = e.expireLocked(now)
	prev := e.fence
	next, stale, why := admitFence(e.fence, l.Cluster, l.Token)
	if stale {
		return stop, e.refuseStaleLocked(l, why)
	}
	if !next.equal(e.persisted) {
		if next.Cluster != e.fence.Cluster && e.fence.Cluster != "" {
			e.log.Warn("a new cluster took over: the old one is fenced off for good", "old_cluster", e.fence.Cluster, "cluster", next.Cluster, "leader", l.Node)
		}
		e.fence = next // fence older leaders off even if the write fails
		if err := saveFence(e.cfg.DataDir, next); err != nil {
			e.storageFailedLocked(fileToken, err)
			e.log.Error("cannot persist the fencing token: refusing the request", "token", l.Token, "err", err)
			return stop, refuse(http.StatusInternalServerError, "%v", err)
		}
		e.storageOKLocked(fileToken)
		if next.Token != e.persisted.Token {
			e.log.Info("new leader", "leader", l.Node, "addr", l.Addr, "cluster", next.Cluster, "token", l.Token)
		}
		e.persisted = next
	}
	e.fence = next
	if next.Token != prev.Token || next.Cluster != prev.Cluster {
		// A new term, perhaps a leader of an older release at the same
		// address: pushes go as JSON until its heartbeat asks for binary.
		e.leaderBinary = false
	}
	if l.Addr != "" && l.Addr != e.leaderAddr {
		e.leaderAddr = l.Addr
		e.leaderBinary = false // as for a new term
		e.kickLocked()         // changes a failed push left behind go to the new leader
	}
	if renew {
		e.lease.renew(now)
		e.writeLeaseFileLocked()
	}
	return stop, nil
}

// expireLocked fences the executor if the lease has expired at now: every
// live execution is cancelled. It returns the ids to stop.
func (e *Executor) expireLocked(now time.Time) []string {
	if !e.lease.check(now) {
		return nil
	}
	live := e.held.live()
	// The silence as it was, not the threshold: a check that came late
	// (the executor held up) says how late.
	msg := leaseMessage(now.Sub(e.lease.last).Round(100*time.Millisecond), e.cfg.Lease, e.lease.heldUp(now).Round(100*time.Millisecond))
	switch {
	case len(live) > 0:
		e.metrics.selfFences.Inc()
		e.log.Error("SELF-FENCING: "+msg+"; stopping every task", "since", e.lease.last, "tasks", len(live))
	case !e.lease.held:
		// No leader has heartbeated it since it started (a new or
		// restarted executor while its cluster forms): it has no lease
		// to lose, and nothing to stop.
		e.log.Info("no leader has heartbeated this executor yet; waiting for one", "since", e.lease.last)
	default:
		e.metrics.selfFences.Inc()
		e.log.Warn("SELF-FENCING: "+msg+"; no task to stop", "since", e.lease.last)
	}
	return e.cancelLocked(live, msg)
}

// cancelLocked requests that ids stop, ending CANCELED with msg; it returns
// those the runtime must stop now.
func (e *Executor) cancelLocked(ids []string, msg string) []string {
	var stop []string
	for _, id := range ids {
		before := e.held.state(id)
		if e.held.cancel(id, msg) {
			stop = append(stop, id)
		}
		if dt := e.data[id]; dt != nil && e.held.canceled(id) {
			dt.prepCancel() // a fetch before the start stops at once
		}
		e.noteLocked(id, before)
	}
	return stop
}

// cancelAll cancels every live execution.
func (e *Executor) cancelAll(msg string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cancelLocked(e.held.live(), msg)
}

// stopTasks carries out stops decided under the lock.
func (e *Executor) stopTasks(ids []string) {
	for _, id := range ids {
		e.rt.stop(id)
	}
}

// noteLocked records that id may have changed from state before: a change
// is logged, queued for the pusher (unless a deploy answer being prepared
// carries it), and an end wakes Shutdown.
func (e *Executor) noteLocked(id string, before wire.State) {
	st, ok := e.held.get(id)
	if !ok || st.State == before {
		return
	}
	if e.answering[id] == 0 {
		e.pending[id] = struct{}{}
		e.kickLocked()
	}
	if st.State.Terminal() {
		e.log.Info("execution ended", "execution", id, "state", st.State, "message", st.Message)
		e.endedLocked(id, st.State)
		close(e.settled)
		e.settled = make(chan struct{})
	} else {
		e.log.Debug("execution changed", "execution", id, "state", st.State)
	}
}

// onExit is the runtimes' callback: a task has ended. The lease is checked
// first: a task its shim stopped because the lease ran out (the shim may see
// it before the lease loop does) ends CANCELED for the lease like the rest.
//
// A producer that exited 0 keeps its output as a partition before its
// FINISHED state is recorded, so no report shows it FINISHED before its
// partition can be fetched; if that fails (a full disk), it FAILED. From
// the moment it is kept its streams end complete, so a cancel that comes
// meanwhile comes after its end and changes nothing (heldSet.exiting): it
// never ends CANCELED with its output read whole.
func (e *Executor) onExit(id string, res exitResult) {
	e.mu.Lock()
	stop := e.expireLocked(e.cfg.Now())
	dt := e.data[id]
	keep := dt != nil && dt.produces && res.Code == 0 && res.Message == "" && !e.held.stopping(id)
	if keep {
		e.held.exiting(id)
	}
	e.mu.Unlock()
	e.stopTasks(stop)
	if keep {
		n, err := e.store.Commit(id)
		if err != nil {
			res.Message = "exit status 0, but its output could not be kept: " + e.withDiskNote(err)
		}
		res.Bytes = n
	}
	if res.Code != 0 && res.Message == "" {
		res.Note = e.diskNote(nil)
	}
	e.mu.Lock()
	stop = e.expireLocked(e.cfg.Now())
	before := e.held.state(id)
	e.held.exited(id, res)
	if keep && e.held.state(id) == wire.StateFinished {
		e.newParts[id] = struct{}{} // the push of its end carries it
	}
	e.noteLocked(id, before)
	e.mu.Unlock()
	e.stopTasks(stop)
}

// leaseLoop checks the lease every Lease/20.
func (e *Executor) leaseLoop() {
	defer e.loops.Done()
	t := time.NewTicker(leaseTick(e.cfg.Lease))
	defer t.Stop()
	for {
		select {
		case <-e.quit:
			return
		case <-t.C:
			now := e.cfg.Now()
			e.mu.Lock()
			stop := e.expireLocked(now)
			e.lease.checked = now
			e.mu.Unlock()
			e.stopTasks(stop)
		}
	}
}

// deploy handles a deploy request: it registers every new task before
// starting any, starts them, and answers every task's state. Changes made
// while the request is handled travel in the answer, not in a push: a
// deploy of many tasks costs the leader one report, not two. Should the
// answer be lost, the next heartbeat's report carries the same states.
func (e *Executor) deploy(now time.Time, l wire.Leader, tasks []wire.Task) ([]wire.ExecutionStatus, *requestError) {
	checked := make(map[*wire.Input]bool)
	for _, t := range tasks {
		if err := validateTask(t); err != nil {
			return nil, refuse(http.StatusBadRequest, "%v", err)
		}
		if err := validateEdges(t, checked); err != nil {
			return nil, refuse(http.StatusBadRequest, "%v", err)
		}
	}
	out := make([]wire.ExecutionStatus, len(tasks))
	// Executions whose partitions are kept here ran here already (before a
	// restart, maybe): they do not run again.
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ExecutionID
	}
	kept := make(map[string]wire.Partition)
	for _, p := range e.store.Lookup(ids) {
		kept[p.ID] = p
	}
	e.mu.Lock()
	// Only heartbeats renew the lease (a deploy or cancel may be a late
	// message the leader no longer counts on).
	stop, rerr := e.admitRenewLocked(now, l, false)
	if rerr == nil && leaseExpired(e.lease.last, now, e.lease.dur) {
		// A deploy that waited out the lease (sent before a freeze and
		// read after the thaw, say) may name tasks the leader has since
		// failed and placed elsewhere: start nothing until a heartbeat
		// renews the lease. The leader's reconciler resends the deploy.
		rerr = refuse(http.StatusServiceUnavailable, "executor %s starts no task: no heartbeat from a leader for %s (its lease ran out); the next heartbeat renews it",
			e.cfg.NodeID, now.Sub(e.lease.last).Round(time.Millisecond))
	}
	var fresh []wire.Task
	if rerr == nil {
		for _, t := range tasks {
			e.answering[t.ExecutionID]++
		}
		for _, t := range tasks {
			if p, ok := kept[t.ExecutionID]; ok {
				e.held.kept(t, p, now)
			}
			if e.held.deploy(t) {
				fresh = append(fresh, t)
				if hasData(t) {
					e.data[t.ExecutionID] = e.newDataTask(t)
				}
				e.noteLocked(t.ExecutionID, "")
			}
		}
		e.statusesLocked(tasks, out)
	}
	e.mu.Unlock()
	e.stopTasks(stop)
	if rerr != nil {
		return nil, rerr
	}
	if len(fresh) > 0 {
		ids := make([]string, 0, min(len(fresh), maxLoggedIDs))
		for _, t := range fresh[:min(len(fresh), maxLoggedIDs)] {
			ids = append(ids, t.ExecutionID)
		}
		e.log.Info("deploying", "leader", l.Node, "token", l.Token, "tasks", len(fresh), "executions", ids)
	}
	for _, t := range fresh {
		// A task that must fetch its inputs first starts in the
		// background: it is DEPLOYING meanwhile, and the answer does not
		// wait for the bytes.
		if !e.startsLater(t) || !e.goData(nil, func() { e.startTask(t) }) {
			e.startTask(t)
		}
	}
	e.mu.Lock()
	e.statusesLocked(tasks, out)
	for _, t := range tasks {
		if e.answering[t.ExecutionID]--; e.answering[t.ExecutionID] <= 0 {
			delete(e.answering, t.ExecutionID)
		}
	}
	e.mu.Unlock()
	return out, nil
}

// statusesLocked fills out[i] with the status of tasks[i], where it is still
// held (one ended and acknowledged meanwhile keeps its last status).
func (e *Executor) statusesLocked(tasks []wire.Task, out []wire.ExecutionStatus) {
	for i, t := range tasks {
		if st, ok := e.held.last(t.ExecutionID); ok {
			out[i] = st
		}
	}
}

// startTask starts a registered task unless it was cancelled meanwhile,
// after the data plane has prepared it (its inputs fetched, its pipes fed).
func (e *Executor) startTask(t wire.Task) {
	id := t.ExecutionID
	var err error
	e.mu.Lock()
	skip := e.held.canceled(id)
	dt := e.data[id]
	e.mu.Unlock()
	switch {
	case skip:
		err = errCanceledBeforeStart
	case t.Slot < 0 || t.Slot >= e.cfg.Slots:
		err = fmt.Errorf("slot %d out of range: executor %s has slots 0..%d", t.Slot, e.cfg.NodeID, e.cfg.Slots-1)
	case dt != nil:
		if err = e.prepare(dt); err == nil {
			err = e.mayStart(id)
		}
		if err == nil {
			err = e.rt.start(t)
		}
	default:
		if err = e.mayStart(id); err == nil {
			err = e.rt.start(t)
		}
	}
	if err != nil && !skip {
		e.log.Warn("task did not start", "execution", id, "err", err)
	}
	e.mu.Lock()
	before := e.held.state(id)
	stop := e.held.started(id, err)
	e.noteLocked(id, before)
	e.mu.Unlock()
	if stop {
		e.rt.stop(id)
	}
}

// mayStart checks, just before task id starts, that it still may: not
// cancelled, no input broken, and the lease not run out while it waited
// for its inputs (or while the deploy was held up): an executor whose lease
// has run out starts nothing, as the leader may have placed the attempt
// elsewhere. A lease found run out here fences the executor as the lease
// loop would, and the task with it.
func (e *Executor) mayStart(id string) error {
	e.mu.Lock()
	stop := e.expireLocked(e.cfg.Now())
	stopping := e.held.stopping(id)
	e.mu.Unlock()
	e.stopTasks(stop)
	if stopping {
		return errStoppedBeforeStart
	}
	return nil
}

// maxLoggedIDs bounds the execution ids a log line lists (its count says
// how many there were).
const maxLoggedIDs = 10

// cancel handles a cancel request.
func (e *Executor) cancel(now time.Time, req wire.CancelRequest) *requestError {
	e.mu.Lock()
	stop, rerr := e.admitRenewLocked(now, req.Leader, false)
	if rerr == nil {
		stop = append(stop, e.cancelLocked(req.IDs, "canceled by the leader")...)
	}
	e.mu.Unlock()
	e.stopTasks(stop)
	return rerr
}

// heartbeat handles a heartbeat: it forgets the acknowledged executions and
// answers the full report. A partition whose files are gone from disk is
// no longer listed (the leader then counts it lost). binary: the leader
// asked for the answer in binary, and so takes pushes in binary.
func (e *Executor) heartbeat(now time.Time, req wire.HeartbeatRequest, binary bool) (wire.Report, *requestError) {
	e.store.Verify()
	e.mu.Lock()
	stop, rerr := e.admitRenewLocked(now, req.Leader, !req.Probe)
	var rep wire.Report
	if rerr == nil {
		if req.Leader.Addr == e.leaderAddr {
			e.leaderBinary = binary
		}
		e.ackLocked(req.Ack)
		rep = e.reportLocked(e.held.list(), false)
		rep.Partitions = e.store.List()
	}
	e.mu.Unlock()
	e.stopTasks(stop)
	return rep, rerr
}

// release handles a release request: the partitions it names are
// deleted (unknown ids are ignored).
func (e *Executor) release(now time.Time, req wire.ReleaseRequest) *requestError {
	e.mu.Lock()
	stop, rerr := e.admitRenewLocked(now, req.Leader, false)
	e.mu.Unlock()
	e.stopTasks(stop)
	if rerr != nil {
		return rerr
	}
	gone := e.store.Release(req.IDs)
	if len(gone) > 0 {
		e.log.Info("partitions released", "leader", req.Node, "executions", gone)
		e.mu.Lock()
		for _, id := range gone {
			delete(e.newParts, id)
		}
		e.mu.Unlock()
	}
	return nil
}

// ackLocked forgets acknowledged terminal executions.
func (e *Executor) ackLocked(ids []string) {
	now := e.cfg.Now()
	for _, id := range ids {
		if e.held.ack(id, now) {
			delete(e.pending, id)
		}
	}
	e.held.prune(now.Add(-e.cfg.rememberForgotten()))
}

// reportLocked builds a report carrying execs.
func (e *Executor) reportLocked(execs []wire.ExecutionStatus, partial bool) wire.Report {
	return wire.Report{
		Version:    wire.Version,
		Executor:   e.cfg.NodeID,
		Instance:   e.instance,
		Token:      e.fence.Token,
		Slots:      e.cfg.Slots,
		LeaseMs:    e.cfg.Lease.Milliseconds(),
		UsedSlots:  e.held.usedSlots(),
		Partial:    partial,
		Executions: execs,
		// A partial report (a push) carries them too: a leader that only
		// hears pushes (its heartbeats are refused) still learns of them.
		DiskFull:     e.diskFullNow(),
		StorageError: e.storageErrorLocked(),
		CPUMillis:    e.cfg.CPUMillis,
		MemoryMB:     e.cfg.MemoryMB,
	}
}

// executions answers GET /v1/executions.
func (e *Executor) executions() wire.Executions {
	e.mu.Lock()
	defer e.mu.Unlock()
	return wire.Executions{FencingToken: e.fence.Token, Executions: e.held.list()}
}
