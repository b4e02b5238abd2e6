package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"jobmaster/fsm"
)

// monitorLeadership is the single consumer of Raft's leadership changes.
// Raft may coalesce changes: two "true" in a row mean leadership was lost and
// regained, so the old session is stopped and a new one (a new epoch)
// started.
func (m *Master) monitorLeadership() {
	var cur *session
	stopCur := func() {
		if cur != nil {
			cur.stop()
			cur = nil
		}
	}
	defer stopCur()
	for {
		select {
		case <-m.stop:
			return
		case req := <-m.replaceCh:
			// The state is being replaced (a snapshot restore). The
			// session stops first, so that nothing it decided from the old
			// state is proposed on top of the new one (the restored epoch
			// may be no newer than its token); a new session, a new epoch,
			// starts after.
			leading := cur != nil
			stopCur()
			err := req.replace()
			if leading {
				cur = m.startSession()
			}
			req.done <- err
		case leader := <-m.raft.LeaderCh():
			stopCur()
			if leader {
				cur = m.startSession()
			}
		}
	}
}

// replaceRequest asks the leadership monitor to run replace (which swaps
// the replicated state) with no session running.
type replaceRequest struct {
	replace func() error
	done    chan error
}

// replaceState runs replace between the end of the current session and the
// start of a new one with a new epoch, and returns its error.
func (m *Master) replaceState(replace func() error) error {
	req := replaceRequest{replace: replace, done: make(chan error, 1)}
	select {
	case m.replaceCh <- req:
	case <-m.stop:
		return errShutdown
	}
	select {
	case err := <-req.done:
		return err
	case <-m.stop:
		return errShutdown
	}
}

// session is one term of leadership: from establishing the epoch until
// leadership is lost. Everything it starts stops with it.
type session struct {
	m     *Master
	token uint64
	// cluster is the cluster's id, carried with the token to executors.
	cluster string
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}

	tracker *tracker
	// kickSchedule wakes the scheduler.
	kickSchedule chan struct{}
}

func (m *Master) startSession() *session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{m: m, ctx: ctx, cancel: cancel, done: make(chan struct{}), kickSchedule: make(chan struct{}, 1)}
	go s.run()
	return s
}

// stop ends the session and waits until all its goroutines have returned.
func (s *session) stop() {
	s.cancel()
	<-s.done
}

func (s *session) run() {
	defer close(s.done)
	m := s.m
	start := m.cfg.Now()
	token, cluster, barrier, err := s.establish()
	for err != nil {
		if s.ctx.Err() != nil {
			return
		}
		m.log.Error("could not establish leadership; stepping down", "err", err)
		// A leader that cannot commit is of no use: let another try.
		terr := m.raft.LeadershipTransfer().Error()
		if terr == nil {
			return // this session ends with the leadership
		}
		// No other master could take over (none caught up, or none
		// reachable): a leader without a session answers nothing, so
		// try again rather than wait for Raft to depose it.
		m.log.Warn("could not hand over leadership; establishing it again", "err", terr)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(time.Second):
		}
		token, cluster, barrier, err = s.establish()
	}
	s.token, s.cluster = token, cluster
	s.tracker = newTracker(s)
	m.setSession(s)
	m.metrics.sessions.Inc()
	// took is from winning the election (Raft's word reaching this
	// master) to the epoch's commit; barrier is its first part, the rest
	// the commit of establish-leadership (docs/BENCHMARKS.md reads both).
	m.log.Info("leadership established", "token", token, "cluster", cluster, "took", m.cfg.Now().Sub(start), "barrier", barrier)

	done := make(chan struct{})
	var running int
	spawn := func(f func()) {
		running++
		go func() {
			defer func() { done <- struct{}{} }()
			f()
		}()
	}
	spawn(s.tracker.run)
	spawn(s.schedule)
	spawn(s.restarts)
	spawn(s.reconcileVoters)
	spawn(s.collectGarbage)
	spawn(s.cleanupDeadMasters)
	<-s.ctx.Done()
	// Requests stop using this session now, not when its goroutines have
	// wound down (a deploy in flight may take seconds): a master that lost
	// and regained leadership must not serve reads from the old session
	// before the new one's Barrier.
	m.setSession(nil)
	for ; running > 0; running-- {
		<-done
	}
	s.tracker.wait()
	m.log.Info("leadership lost", "token", token)
}

// current reports whether the session's epoch is the state's: after
// losing and regaining leadership, the old session may still be published
// for a moment, while the FSM may not yet hold the earlier terms' entries
// (the new session's Barrier has not run). Only a current session reads.
func (s *session) current() bool {
	var epoch uint64
	s.m.fsm.Read(func(st *fsm.State) { epoch = st.Epoch() })
	return epoch == s.token
}

// establish runs a Barrier, so that the FSM holds every entry of earlier
// terms, then commits establish-leadership; its index is the new fencing
// token. The first leader of a cluster names it. It also returns how long
// the last Barrier took.
func (s *session) establish() (token uint64, cluster string, barrier time.Duration, err error) {
	m := s.m
	for attempt := 0; ; attempt++ {
		if err = s.ctx.Err(); err != nil {
			return 0, "", 0, err
		}
		b0 := m.cfg.Now()
		err = m.raft.Barrier(5 * time.Second).Error()
		barrier = m.cfg.Now().Sub(b0)
		if err == nil {
			cmd := &fsm.EstablishLeadership{Node: m.cfg.NodeID}
			var restoring, diverged string
			m.fsm.Read(func(st *fsm.State) { cluster, restoring, diverged = st.Cluster(), st.Restoring(), st.Diverged() })
			if diverged != "" {
				// A restore that did not take (watchDivergence halts it):
				// this master leads no epoch with it.
				return 0, "", 0, fmt.Errorf("this master's state is a restore that did not take (cluster %s)", diverged)
			}
			if cluster == "" {
				cluster = newClusterID()
				cmd.Cluster = cluster
			} else {
				cmd.Expect = cluster
			}
			if restoring != "" && restoring != cluster {
				// A restore was announced and this state is not it: it did
				// not take (its leader stopped before the others had it).
				cmd.Aborted = restoring
				m.log.Warn("a snapshot restore did not complete: its leader stopped before the others had the restored state; the state is the one before it", "restore_cluster", restoring, "cluster", cluster)
			}
			var r fsm.Result
			r, err = m.prop.ProposeOne(s.ctx, cmd)
			if err == nil {
				if cmd.Cluster != "" {
					m.log.Info("cluster named", "cluster", cluster)
				}
				return r.Epoch, cluster, barrier, nil
			}
		}
		if attempt >= 3 {
			return 0, "", 0, err
		}
		m.log.Warn("establishing leadership", "err", err)
		select {
		case <-s.ctx.Done():
			return 0, "", 0, s.ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// newClusterID is a random cluster id.
func newClusterID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fenced stamps a command with the session's token and the clock.
func (s *session) fenced() fsm.Fenced {
	return fsm.Fenced{Token: s.token, Time: s.m.cfg.Now().UnixMilli()}
}

// propose commits commands under this session. A stale-token result means
// a newer leader exists: the session is over.
func (s *session) propose(cmds ...fsm.Command) ([]fsm.Result, error) {
	rs, _, err := s.m.prop.Propose(s.ctx, cmds...)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if errors.Is(r.Err, fsm.ErrStaleToken) {
			return rs, r.Err
		}
	}
	return rs, nil
}

// kick wakes the scheduler without blocking.
func (s *session) kick() {
	select {
	case s.kickSchedule <- struct{}{}:
	default:
	}
}
