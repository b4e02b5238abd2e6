package executor

import (
	"context"
	"errors"
	"time"

	"jobmaster/membership"
	"jobmaster/transport"
	"jobmaster/wire"
)

// DefaultDrainGrace is how long an executor told to stop (SIGTERM) lets
// its work go on, drained, before it stops it.
const DefaultDrainGrace = 30 * time.Second

// drainPoll is how often Drain looks whether the executor still holds
// anything.
const drainPoll = 100 * time.Millisecond

// Drain is the first half of a graceful stop: the executor asks the leader
// for its own drain with a deadline of grace, so that it gets no new work,
// what runs may finish, and what has not finished at the deadline (or what
// it holds for consumers) is moved elsewhere without counting as a failure.
// It returns once the executor holds nothing (no live execution, no
// partition), or when the deadline has passed by the time the leader needs
// to cancel what is left there (the cancel grace and a heartbeat's margin),
// or when ctx ends. Shutdown, which follows, stops whatever is left.
//
// An executor that holds nothing, or whose request no master answers,
// returns at once: there is nothing to keep, or nobody to move it.
func (e *Executor) Drain(ctx context.Context, grace time.Duration) error {
	if grace <= 0 || e.idle() {
		return nil
	}
	req := wire.DrainRequest{Version: wire.Version, Executor: e.cfg.NodeID, Instance: e.instance, DeadlineMs: grace.Milliseconds()}
	if err := e.askDrain(ctx, req); err != nil {
		e.log.Warn("could not ask for a drain before stopping: stopping at once", "err", err)
		return err
	}
	e.log.Info("draining before stopping", "grace", grace)
	wait := time.NewTimer(grace + e.cfg.CancelGrace + 2*time.Second)
	defer wait.Stop()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for !e.idle() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait.C:
			e.log.Warn("drain grace over: stopping what is left")
			return nil
		case <-tick.C:
		}
	}
	e.log.Info("drained: nothing left to move")
	return nil
}

// idle reports whether the executor holds no live execution and no
// partition.
func (e *Executor) idle() bool {
	e.mu.Lock()
	live := e.held.liveCount()
	e.mu.Unlock()
	return live == 0 && len(e.store.List()) == 0
}

// askDrain sends the drain request to the newest leader, or failing that
// to each master gossip knows (any master forwards it).
func (e *Executor) askDrain(ctx context.Context, req wire.DrainRequest) error {
	e.mu.Lock()
	addrs := []string{e.leaderAddr}
	e.mu.Unlock()
	if e.gossip != nil {
		for _, m := range e.gossip.Role(membership.RoleMaster) {
			if m.Status == membership.StatusAlive && m.Meta.HTTPAddr != "" {
				addrs = append(addrs, m.Meta.HTTPAddr)
			}
		}
	}
	errs := []error{errors.New("no master known")}
	for _, addr := range addrs {
		if addr == "" {
			continue
		}
		u, err := transport.PeerURL(e.client, addr, wire.PathExecutorDrain)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = transport.PostJSON(rctx, e.client, u, req, nil)
		cancel()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
