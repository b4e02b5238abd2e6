package executor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"jobmaster/transport"
	"jobmaster/wire"
)

// pushTimeout bounds one push.
const pushTimeout = 2 * time.Second

// kickLocked wakes the pusher without blocking.
func (e *Executor) kickLocked() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// pushLoop is the only goroutine that pushes during normal operation: each
// wake-up sends every change accumulated since the previous push, so a
// burst of changes costs one request.
func (e *Executor) pushLoop() {
	defer e.loops.Done()
	for {
		select {
		case <-e.quit:
			return
		case <-e.kick:
			e.pushOnce(e.pushCtx)
		}
	}
}

// pushOnce sends the pending changes to the newest leader and forgets the
// executions it acknowledges. On failure the changes stay pending for the
// next push; the next heartbeat's report carries them anyway.
func (e *Executor) pushOnce(ctx context.Context) {
	e.mu.Lock()
	addr, bin := e.leaderAddr, e.leaderBinary
	if addr == "" || len(e.pending) == 0 && len(e.newParts) == 0 {
		e.mu.Unlock()
		return
	}
	ids := make([]string, 0, len(e.pending))
	for id := range e.pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	execs := make([]wire.ExecutionStatus, 0, len(ids))
	for _, id := range ids {
		if st, ok := e.held.get(id); ok {
			execs = append(execs, st)
		}
	}
	clear(e.pending)
	parts := make([]string, 0, len(e.newParts))
	for id := range e.newParts {
		parts = append(parts, id)
	}
	sort.Strings(parts)
	clear(e.newParts)
	rep := e.reportLocked(execs, true)
	rep.Partitions = e.store.Lookup(parts)
	e.mu.Unlock()
	if len(execs) == 0 && len(rep.Partitions) == 0 {
		return
	}
	ack, err := e.post(ctx, addr, rep, bin)
	var se *transport.StatusError
	if bin && errors.As(err, &se) && se.Code == http.StatusUnsupportedMediaType {
		// A master that does not read this report revision (the push
		// reached one of an older release through a relay, say): it
		// acted on nothing; JSON, to this leader, until its heartbeat
		// asks again.
		e.log.Info("leader takes no binary report; pushing JSON", "leader", addr, "err", err)
		e.mu.Lock()
		if e.leaderAddr == addr {
			e.leaderBinary = false
		}
		e.mu.Unlock()
		ack, err = e.post(ctx, addr, rep, false)
	}
	e.metrics.pushes.Inc()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.metrics.pushFailures.Inc()
		e.log.Debug("push failed; the next change or heartbeat carries it", "leader", addr, "err", err)
		for _, st := range execs {
			if _, ok := e.held.get(st.ExecutionID); ok {
				e.pending[st.ExecutionID] = struct{}{}
			}
		}
		for _, p := range rep.Partitions {
			e.newParts[p.ID] = struct{}{}
		}
		return
	}
	e.ackLocked(ack)
}

// post sends rep to the master at addr, in binary when bin is set, and
// returns its acknowledgments.
func (e *Executor) post(ctx context.Context, addr string, rep wire.Report, bin bool) ([]string, error) {
	var ur wire.UpdateResponse
	url, err := transport.PeerURL(e.client, addr, wire.PathExecutorUpdate)
	if err != nil {
		return nil, err
	}
	if bin {
		err = transport.PostBody(ctx, e.client, url, wire.ReportType, wire.AppendReport(nil, &rep), &ur)
	} else {
		err = transport.PostJSON(ctx, e.client, url, rep, &ur)
	}
	var se *transport.StatusError
	if errors.As(err, &se) {
		return nil, fmt.Errorf("push answered %w", se)
	}
	if err != nil {
		return nil, err
	}
	return ur.Ack, nil
}
