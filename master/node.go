// Package master is a jobmaster master node: Raft wiring (package fsm holds
// the state), leadership, the HTTP API with forwarding to the leader, and the
// goroutines that carry out the leader's decisions. The decisions themselves
// are package leader's: this package gathers their inputs (the state, gossip,
// executors' answers, the clock) and carries out the Ready each returns
// (carry.go).
//
// Vocabulary (package leader defines the rest: executor table, probe, ack,
// report, kick):
//   - session: one term of leadership, from the commit of the epoch until
//     leadership is lost; everything it starts stops with it, and every
//     command it proposes carries its fencing token.
//   - wave: every heartbeat interval, one channel close wakes every
//     executor's heartbeat goroutine at once.
//   - forwarding: a master that does not lead relays a request to the
//     leader; hops counts the relays (X-Jobmaster-Hops), so a request is
//     never relayed in a circle.
//
// Goroutines and what they own:
//   - monitorLeadership: the only consumer of Raft's leadership changes. It
//     starts a session when this master becomes leader and stops it, waiting
//     for every one of its goroutines, before handling the next change.
//   - a session (leader only): establishes the epoch, then runs the
//     scheduler, the tracker (executors.go: the executor table, liveness
//     ticks, cancels; one heartbeat goroutine per executor), the restarter,
//     the garbage collector and the voter reconciler.
//   - bootstrap: until this master belongs to a cluster, watches gossip and
//     forms the cluster once --bootstrap-expect masters are seen.
//   - proposer: batches commands into Raft entries.
//   - the HTTP server's handlers: read the FSM, propose through the
//     session, or forward to the leader.
package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sync/semaphore"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/internal/dirlock"
	"jobmaster/internal/privatedir"
	"jobmaster/membership"
	"jobmaster/metrics"
	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// Master is a running master node.
type Master struct {
	cfg    Config
	log    *slog.Logger
	fsm    *fsm.FSM
	rp     *raftParts
	raft   *raft.Raft
	prop   *proposer
	gossip *membership.Node

	httpSrv  *http.Server
	httpLn   net.Listener
	httpAddr string
	// client talks to other masters (forwarding) and to executors.
	client *http.Client
	// tls is the master's TLS material (tls.go); nil when TLS is off.
	tls *transport.TLS
	// metrics is what GET /v1/metrics serves (metrics.go).
	metrics *masterMetrics
	// succession watches the leader for a crash (succession.go).
	succession *successionWatch
	// relay carries submissions to the leader in batches (relay.go).
	relay *relay
	// bigReads is the budget that reads of big jobs share (readbudget.go).
	bigReads *semaphore.Weighted
	// pushes bounds the executors' pushes decoded at once (pushBudget);
	// pushLocks serialize each executor's (pushLock).
	pushes    *semaphore.Weighted
	pushMu    sync.Mutex
	pushLocks map[string]*semaphore.Weighted
	// leaderForTokens is the leader's HTTP address and id when another
	// master leads, else "" (leaderHTTPAddr); tokenAsks bounds the
	// questions about tokens in flight to it, and tokenRefusals remembers
	// its noes (acl_leader.go).
	leaderForTokens func() (httpAddr, id string)
	tokenAsks       chan struct{}
	tokenRefusals   refusals
	// quota counts the submissions admitted and not yet applied (quota.go).
	quota quotaLedger
	// hashing is held while a state hash is made, and lastHash is the
	// last one made (stateHash).
	hashing    chan struct{}
	lastHash   *api.StateHash
	hashesMade int // how many captures stateHash made (tests read it)
	// bigReadWrite bounds the writing of a big read's answer
	// (bigReadWriteTimeout; tests shorten it).
	bigReadWrite time.Duration
	// logRelays holds a place per task log being relayed (logrelays.go);
	// logLimits bounds each (api_logs_relay.go; tests shorten them).
	logRelays *logRelays
	logLimits logLimits

	mu      sync.Mutex
	session *session // the established leader session, or nil
	// sessionChanged is closed and replaced whenever session changes, and
	// whenever Raft's word of the leader does (watchLeaderChanges): a
	// request held for want of a leader goes on at once.
	sessionChanged chan struct{}
	inCluster      bool
	// proposal is the digest of the masters this one proposes to bootstrap
	// with, gossiped until it is in a cluster (bootstrap.go).
	proposal  string
	replaceCh chan replaceRequest

	stop     chan struct{}
	wg       sync.WaitGroup
	shutOnce sync.Once
	// halted is closed when this master finds its state is not the
	// cluster's (watchDivergence); haltErr says why.
	halted  chan struct{}
	haltErr error
	// restoring is held by the snapshot restore in progress.
	restoring sync.Mutex
}

// New starts a master: Raft, gossip, the HTTP API, and bootstrap.
func New(cfg Config) (*Master, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	tl, gossipKeys, err := loadSecurity(&cfg)
	if err != nil {
		return nil, err
	}
	if err := dirlock.CheckRole(cfg.DataDir, "master"); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if was, err := privatedir.Ensure(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	} else if was != 0 {
		cfg.Logger.Warn("data directory made private: it holds every job spec with its env", "node", cfg.NodeID, "dir", cfg.DataDir, "was", was.String(), "now", "drwx------")
	}
	if msg, err := os.ReadFile(filepath.Join(cfg.DataDir, divergedFile)); err == nil {
		return nil, fmt.Errorf("--data-dir %s: this master halted: %s", cfg.DataDir, strings.TrimSpace(string(msg)))
	}
	// A restore's uploads (api_operator.go) are removed once it ends; one
	// that a stop cut short leaves them, each up to --max-snapshot-bytes.
	if left, _ := filepath.Glob(filepath.Join(cfg.DataDir, "restore-*.snap")); len(left) > 0 {
		for _, f := range left {
			_ = os.Remove(f)
		}
		cfg.Logger.Info("removed the uploads of a snapshot restore cut short", "node", cfg.NodeID, "files", len(left))
	}
	// Before Raft and gossip start, so that their first metrics count.
	if _, err := metrics.RouteLibraries(); err != nil {
		cfg.Logger.Warn("raft's and memberlist's metrics are not exported", "err", err)
	}
	m := &Master{
		cfg:            cfg,
		log:            cfg.Logger.With("node", cfg.NodeID),
		fsm:            fsm.NewWithEvents(cfg.EventBuffer),
		bigReads:       semaphore.NewWeighted(readBudget),
		pushes:         semaphore.NewWeighted(pushBudget),
		pushLocks:      map[string]*semaphore.Weighted{},
		bigReadWrite:   bigReadWriteTimeout,
		tokenAsks:      make(chan struct{}, maxTokenAsks),
		hashing:        make(chan struct{}, 1),
		logRelays:      newLogRelays(maxLogRelays, maxLogRelaysPerCaller),
		logLimits:      defaultLogLimits(),
		stop:           make(chan struct{}),
		halted:         make(chan struct{}),
		sessionChanged: make(chan struct{}),
		replaceCh:      make(chan replaceRequest),
		tls:            tl,
		client: transport.NewClient(transport.ClientOptions{
			DialTimeout:         time.Second,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
			TLS:                 tl,
			PeerCheck:           transport.NodePeer,
		}),
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("--http-addr: %w", err)
	}
	m.httpLn = ln
	if m.httpAddr, err = membership.Advertise(ln.Addr().String()); err != nil {
		ln.Close()
		return nil, fmt.Errorf("--http-addr: %w", err)
	}
	rp, err := openRaft(&m.cfg, m.fsm, tl)
	if err != nil {
		ln.Close()
		return nil, err
	}
	m.rp, m.raft = rp, rp.raft
	if rp.guard.HoldingVotes() {
		m.log.Info("not voting until a leader has brought this master's log up to date, or it founds a new cluster: it starts with an empty Raft log, which may lack entries it acknowledged before (a data directory lost)")
	}
	m.inCluster = rp.hadState
	m.prop = newProposer(m.raft)
	g, err := membership.Start(membership.Config{
		NodeID:   cfg.NodeID,
		BindAddr: cfg.GossipAddr,
		Join:     cfg.Join,
		Meta:     m.meta(),
		Logger:   cfg.Logger.With("node", cfg.NodeID, "component", "gossip"),
		Now:      m.cfg.Now,
		Keys:     gossipKeys,
		Slow:     cfg.GossipTimings,
	})
	if err != nil {
		m.prop.close()
		rp.close()
		ln.Close()
		return nil, err
	}
	m.gossip = g
	m.metrics = newMasterMetrics(m)
	if tl != nil {
		metrics.RegisterCertExpiry(m.metrics.reg, tl.NotAfter, cfg.Now)
	}
	m.succession = newSuccessionWatch(m)
	m.relay = newRelay(m)
	m.leaderForTokens = func() (string, string) {
		_, id := m.raft.LeaderWithID()
		if id == "" || string(id) == m.cfg.NodeID {
			return "", ""
		}
		mem, ok := m.gossip.Get(string(id))
		if !ok {
			return "", ""
		}
		return mem.Meta.HTTPAddr, string(id)
	}
	m.httpSrv = transport.NewServer(m.routes(), transport.ServerOptions{TLS: tl, MaxConnsPerClient: cfg.MaxConnsPerClient,
		Logger: m.log.With("component", "http")})
	m.goFunc(m.monitorLeadership)
	m.goFunc(m.watchMembership)
	m.goFunc(m.succession.run)
	m.goFunc(m.watchLeaderChanges)
	m.goFunc(func() {
		if err := transport.Serve(m.httpSrv, ln); err != nil {
			m.log.Error("http server", "err", err)
		}
	})
	m.log.Info("master started", "http", m.httpAddr, "raft", rp.advertise, "gossip", cfg.GossipAddr,
		"existing_state", rp.hadState, "bootstrap_expect", cfg.BootstrapExpect, "tls", tl != nil, "gossip_encrypted", len(gossipKeys) > 0, "acl", cfg.ACL, "placement", cfg.Placement.String())
	if !cfg.ACL {
		m.goFunc(m.warnACLOff)
	}
	m.goFunc(m.watchDivergence)
	m.goFunc(m.watchUnsettledRestore)
	if tl != nil {
		m.goFunc(func() {
			pki.WatchExpiry(tl.NotAfter, m.cfg.Now, time.Hour, m.stop, func(msg string, expired bool) {
				if expired {
					m.log.Error(msg)
				} else {
					m.log.Warn(msg)
				}
			})
		})
	}
	return m, nil
}

// divergedFile, in the data directory, records a halt (watchDivergence):
// the master refuses to start on that directory.
const divergedFile = "DIVERGED"

// Halted is closed when this master must stop: its state is a snapshot
// restore that did not take (fsm.State.Diverged). HaltErr then says why
// and what to do; the process shuts the master down and exits.
func (m *Master) Halted() <-chan struct{} { return m.halted }

// HaltErr is why the master halted (nil before Halted is closed).
func (m *Master) HaltErr() error {
	select {
	case <-m.halted:
		return m.haltErr
	default:
		return nil
	}
}

// watchDivergence halts the master once its state turns out to be a
// snapshot restore its leader began and the cluster did not commit
// (fsm/restoreintent.go): serving it, or leading with it, would replace
// the cluster's state with one nobody acknowledged, and move the
// executors to its cluster id.
func (m *Master) watchDivergence() {
	for {
		changed := m.fsm.Changed()
		var id string
		m.fsm.Read(func(st *fsm.State) { id = st.Diverged() })
		if id != "" {
			m.haltErr = fmt.Errorf("this master's state is a snapshot restore (cluster %s) that its leader began and the cluster did not commit: it is not the cluster's state, and this master stops. Remove its data directory (%s) and start it again: it rejoins and takes the cluster's state from the leader (docs/operations.md, \"Restore\")", id, m.cfg.DataDir)
			m.log.Error("halting: " + m.haltErr.Error())
			// Raft stops at once, so that it votes and leads no more
			// (whatever embeds the master, and however long its stop
			// takes), and the halt outlives a restart until the data
			// directory is removed.
			if err := m.raft.Shutdown().Error(); err != nil {
				m.log.Error("halting: stopping Raft", "err", err)
			}
			if err := os.WriteFile(filepath.Join(m.cfg.DataDir, divergedFile), []byte(m.haltErr.Error()+"\n"), 0o600); err != nil {
				m.log.Error("halting: recording the halt", "err", err)
			}
			close(m.halted)
			return
		}
		select {
		case <-changed:
		case <-m.stop:
			return
		}
	}
}

// warnACLOff says, once, that this master has ACLs off in a cluster whose
// ACL system is bootstrapped: it serves every request on its own port,
// snapshots included, to anyone, while the others check tokens.
func (m *Master) warnACLOff() {
	for {
		changed := m.fsm.Changed()
		var on bool
		m.fsm.Read(func(st *fsm.State) { on = st.ACLBootstrapped() })
		if on {
			m.log.Error("this master runs without --acl in a cluster whose ACLs are bootstrapped: it answers every request, backups included, without a token; restart it with --acl as the others")
			return
		}
		select {
		case <-changed:
		case <-m.stop:
			return
		}
	}
}

func (m *Master) goFunc(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

func (m *Master) meta() membership.Meta {
	m.mu.Lock()
	defer m.mu.Unlock()
	meta := membership.Meta{Role: membership.RoleMaster, HTTPAddr: m.httpAddr, RaftAddr: m.rp.advertise, InCluster: m.inCluster, Version: wire.Version}
	if !m.inCluster {
		meta.Bootstrap = m.proposal
	}
	return meta
}

// ID is the master's node id.
func (m *Master) ID() string { return m.cfg.NodeID }

// HTTPAddr is the address the HTTP API listens on.
func (m *Master) HTTPAddr() string { return m.httpAddr }

// Raft exposes the Raft node (tests and tools).
func (m *Master) Raft() *raft.Raft { return m.raft }

// FSM exposes the replicated state (tests and tools).
func (m *Master) FSM() *fsm.FSM { return m.fsm }

// IsLeader reports whether this master leads with an established epoch.
func (m *Master) IsLeader() bool { return m.currentSession() != nil }

// Token is this master's fencing token while it leads, else 0.
func (m *Master) Token() uint64 {
	if s := m.currentSession(); s != nil {
		return s.token
	}
	return 0
}

func (m *Master) currentSession() *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.session
}

// setSession publishes (or clears) the established session.
func (m *Master) setSession(s *session) {
	m.mu.Lock()
	m.session = s
	close(m.sessionChanged)
	m.sessionChanged = make(chan struct{})
	m.mu.Unlock()
}

// watchLeaderChanges wakes the requests held for want of a leader
// whenever Raft learns of a new one (or loses its leader), until the
// master stops.
func (m *Master) watchLeaderChanges() {
	ch := make(chan raft.Observation, 8)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	m.raft.RegisterObserver(obs)
	defer m.raft.DeregisterObserver(obs)
	for {
		select {
		case <-m.stop:
			return
		case <-ch:
			m.mu.Lock()
			close(m.sessionChanged)
			m.sessionChanged = make(chan struct{})
			m.mu.Unlock()
		}
	}
}

func (m *Master) sessionWatch() (*session, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.session, m.sessionChanged
}

// Shutdown stops the master: the leader session first, then HTTP, gossip
// (without a leave: a stopped master is a failed one to the others, and
// returns under the same name), the proposer and Raft.
func (m *Master) Shutdown(ctx context.Context) error {
	var errs []error
	m.shutOnce.Do(func() {
		close(m.stop)
		errs = append(errs, m.httpSrv.Shutdown(ctx))
		m.wg.Wait()
		errs = append(errs, m.gossip.Shutdown())
		m.prop.close()
		errs = append(errs, m.rp.close())
		m.client.CloseIdleConnections()
		m.log.Info("master stopped")
	})
	return errors.Join(errs...)
}

// Leave is Shutdown after announcing the departure to gossip, for a master
// that is being removed for good.
func (m *Master) Leave(ctx context.Context) error {
	if err := m.gossip.Leave(time.Second); err != nil {
		m.log.Warn("gossip leave", "err", err)
	}
	return m.Shutdown(ctx)
}
