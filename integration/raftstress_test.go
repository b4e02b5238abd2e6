package integration

import (
	"flag"
	"fmt"
	"io"
	"jobmaster/internal/raftguard"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

var raftStress = flag.Int("chaos.raftstress", 0, "TestRaftStressDeposedLeaders: rounds of pause-the-leader on three in-memory Raft nodes (0 skips)")

// The leader's half of the commit hazard (raftcommit_test.go shows the
// follower's). A new leader's replication goroutine reads its last log
// index, then builds the request and reads its commit index: if the
// thread stalls in between (a loaded machine) while the no-op and more
// commit through the other follower, the first request to the deposed
// leader is empty, with prev = the index before the no-op and a commit
// index past it. The stall is injected where Raft calls the transport in
// that window (EncodePeer); nothing else is changed. Three in-memory
// nodes, rounds of: the leader is paused (its incoming requests held, its
// outgoing ones failing) right after it appended entries nobody else has;
// another is elected and commits; the paused one resumes. After each
// round every node must have applied the same entry at every index.

// stallTransport stalls EncodePeer at random while armed, and holds
// incoming requests while paused.
type stallTransport struct {
	*raft.InmemTransport
	armed  atomic.Bool
	rng    *rand.Rand
	rngMu  sync.Mutex
	rpcs   chan raft.RPC
	mu     sync.Mutex
	paused bool
	resume chan struct{}
	stop   chan struct{}
}

func newStallTransport(t *raft.InmemTransport, seed uint64) *stallTransport {
	s := &stallTransport{InmemTransport: t, rng: rand.New(rand.NewPCG(seed, 1)), rpcs: make(chan raft.RPC),
		resume: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		for {
			var rpc raft.RPC
			select {
			case rpc = <-t.Consumer():
			case <-s.stop:
				return
			}
			s.mu.Lock()
			paused, resume := s.paused, s.resume
			s.mu.Unlock()
			if paused {
				select {
				case <-resume:
				case <-s.stop:
					return
				}
			}
			select {
			case s.rpcs <- rpc:
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

func (s *stallTransport) Consumer() <-chan raft.RPC { return s.rpcs }

func (s *stallTransport) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	if s.armed.Load() {
		s.rngMu.Lock()
		// Now and then a long stall, as when the OS does not run the
		// thread for a while on a loaded machine.
		d := time.Duration(0)
		if s.rng.IntN(10) == 0 {
			d = time.Duration(60+s.rng.IntN(140)) * time.Millisecond
		}
		s.rngMu.Unlock()
		time.Sleep(d)
	}
	return s.InmemTransport.EncodePeer(id, addr)
}

func (s *stallTransport) pause(p bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused && !p {
		close(s.resume)
		s.resume = make(chan struct{})
	}
	s.paused = p
}

// fsyncStore takes as long to store entries as a disk's fsync does (Raft
// over bolt, as the masters run it): a new leader's no-op is on disk a few
// milliseconds after its replication goroutines have woken up.
type fsyncStore struct{ *raft.InmemStore }

func (s fsyncStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }
func (s fsyncStore) StoreLogs(ls []*raft.Log) error {
	time.Sleep(3 * time.Millisecond)
	return s.InmemStore.StoreLogs(ls)
}

// termFSM records the index, term and data of every entry applied.
type termFSM struct {
	mu      sync.Mutex
	applied map[uint64]string
	last    uint64
}

func (f *termFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied[l.Index] = fmt.Sprintf("term %d %s", l.Term, l.Data)
	f.last = max(f.last, l.Index)
	return nil
}

func (f *termFSM) Snapshot() (raft.FSMSnapshot, error) {
	return nil, fmt.Errorf("no snapshots here")
}
func (f *termFSM) Restore(io.ReadCloser) error { return fmt.Errorf("no snapshots here") }

type stressNode struct {
	id    string
	raw   *raft.InmemTransport
	trans *stallTransport
	r     *raft.Raft
	fsm   *termFSM
}

// raftStressRounds runs the rounds and returns in how many of them a node
// applied another entry than the others at some index.
func raftStressRounds(t *testing.T, rounds int, clamp bool) (diverged int, detail string) {
	var nodes []*stressNode
	var conf raft.Configuration
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		addr, raw := raft.NewInmemTransportWithTimeout(raft.ServerAddress(id), 5*time.Second)
		nodes = append(nodes, &stressNode{id: id, raw: raw, fsm: &termFSM{applied: map[uint64]string{}}})
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(id), Address: addr})
	}
	connect := func(n *stressNode) {
		for _, o := range nodes {
			if o != n {
				n.raw.Connect(o.raw.LocalAddr(), o.raw)
			}
		}
	}
	for i, n := range nodes {
		connect(n)
		n.trans = newStallTransport(n.raw, uint64(i+1))
		var tr raft.Transport = n.trans
		if clamp {
			// The masters' guard (package raftguard), in front of the stalls.
			tr = raftguard.New(n.trans)
		}
		cfg := raft.DefaultConfig()
		cfg.LocalID = raft.ServerID(n.id)
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
		cfg.CommitTimeout = 5 * time.Millisecond
		cfg.LogOutput = io.Discard
		logs, stable := fsyncStore{raft.NewInmemStore()}, raft.NewInmemStore()
		snaps := raft.NewInmemSnapshotStore()
		require.NoError(t, raft.BootstrapCluster(cfg, logs, stable, snaps, tr, conf))
		r, err := raft.NewRaft(cfg, n.fsm, logs, stable, snaps, tr)
		require.NoError(t, err)
		n.r = r
	}
	defer func() {
		for _, n := range nodes {
			n.trans.pause(false)
			_ = n.r.Shutdown().Error()
			close(n.trans.stop)
		}
	}()
	leaderOf := func(except *stressNode) *stressNode {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, n := range nodes {
				if n != except && n.r.State() == raft.Leader {
					return n
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	// commit commits an entry through whoever leads (not except): the
	// stalls may cost a leader its term at any time.
	commit := func(except *stressNode, what string) *stressNode {
		for try := 0; ; try++ {
			l := leaderOf(except)
			require.NotNil(t, l, "a leader for %s", what)
			if err := l.r.Apply([]byte(what), time.Second).Error(); err == nil {
				return l
			}
			require.Less(t, try, 50, "%s: nothing commits", what)
		}
	}
	for round := 0; round < rounds; round++ {
		var l *stressNode
		for k := 0; k < 2; k++ {
			l = commit(nil, fmt.Sprintf("r%d-committed-%d", round, k))
		}
		// Paused right after appending entries that reach nobody.
		l.trans.pause(true)
		l.raw.DisconnectAll()
		for k := 0; k < 3; k++ {
			l.r.Apply([]byte(fmt.Sprintf("r%d-stale-%d", round, k)), time.Second)
		}
		for _, n := range nodes {
			n.trans.armed.Store(n != l)
		}
		var nl *stressNode
		for k := 0; k < 3; k++ {
			nl = commit(l, fmt.Sprintf("r%d-new-%d", round, k))
		}
		for _, n := range nodes {
			n.trans.armed.Store(false)
		}
		connect(l)
		l.trans.pause(false)
		// Everyone applies the new leader's log.
		target := nl.r.AppliedIndex()
		WaitFor(t, "every node applied the round", 10*time.Second, func() bool {
			for _, n := range nodes {
				n.fsm.mu.Lock()
				last := n.fsm.last
				n.fsm.mu.Unlock()
				if last < target {
					return false
				}
			}
			return true
		})
		// The same entry at every index on every node.
		seen := map[uint64]string{}
		who := map[uint64]string{}
		for _, n := range nodes {
			n.fsm.mu.Lock()
			for idx, v := range n.fsm.applied {
				if prev, ok := seen[idx]; ok && prev != v {
					n.fsm.mu.Unlock()
					return diverged + 1, fmt.Sprintf("round %d: at index %d %s applied %q, %s applied %q", round, idx, who[idx], prev, n.id, v)
				}
				seen[idx], who[idx] = v, n.id
			}
			n.fsm.mu.Unlock()
		}
	}
	return 0, ""
}

// TestRaftStressDeposedLeaders: without the guard the hazard shows up
// within some rounds (how many depends on the stalls); with it, never.
func TestRaftStressDeposedLeaders(t *testing.T) {
	if *raftStress <= 0 {
		t.Skip("a stress run: -chaos.raftstress=200")
	}
	bad, why := raftStressRounds(t, *raftStress, false)
	t.Logf("without the guard: %d divergence in %d rounds %s", bad, *raftStress, why)
	bad, why = raftStressRounds(t, *raftStress, true)
	require.Zero(t, bad, "with the guard: %s", why)
	t.Logf("with the guard: no divergence in %d rounds", *raftStress)
}
