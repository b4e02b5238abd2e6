package integration

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// A hazard in the Raft library the masters run (hashicorp/raft v1.8.0),
// found while explaining the seed-7 failure of issue 16, and the guard
// proposed against it. See docs/chaos.md, "The verdict on seed 7".
//
// A follower that receives AppendEntries sets its commit index to
// min(LeaderCommitIndex, its own last log index) (raft.go, appendEntries,
// "Update the commit index"). The Raft paper says min(leaderCommit, index
// of the last NEW entry): only entries the request has just proved equal
// to the leader's may be committed. The two differ when the follower holds
// entries past what the request covers that are not the leader's: a
// deposed leader (paused, or cut off) holds entries of its own term that
// were never replicated. If a request then covers less than the leader's
// commit index without conflicting with them (an empty one, prev = the
// new leader's last index before its no-op, built while the new leader's
// commit index moved past it), the deposed leader applies its own stale
// entries, and later, when the new leader's entries replace them in its
// log, never applies those: its FSM has another state at the same applied
// index, for good.
//
// These tests drive one follower through Raft's transport with the two
// requests by hand. That Raft's own leader sends the first one when a
// thread stalls, and how often, is raftstress_test.go's (see
// docs/chaos.md).

// appliedFSM records what Raft applied.
type appliedFSM struct {
	mu      sync.Mutex
	applied []string // "index:data"
}

func (f *appliedFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, fmt.Sprintf("%d:%s", l.Index, l.Data))
	return nil
}

func (f *appliedFSM) Snapshot() (raft.FSMSnapshot, error) {
	return nil, fmt.Errorf("no snapshots here")
}
func (f *appliedFSM) Restore(io.ReadCloser) error { return fmt.Errorf("no snapshots here") }

func (f *appliedFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.applied...)
}

// clampingTransport is the proposed guard: before Raft sees an
// AppendEntries request, its commit index is lowered to the last index
// the request itself proves (PrevLogEntry plus its entries). Committing
// less than the leader's commit index is always safe, and a later request
// carries the rest.
type clampingTransport struct {
	raft.Transport
	rpcs chan raft.RPC
	stop chan struct{}
}

func newClampingTransport(t raft.Transport) *clampingTransport {
	c := &clampingTransport{Transport: t, rpcs: make(chan raft.RPC), stop: make(chan struct{})}
	go func() {
		for {
			select {
			case rpc := <-t.Consumer():
				if a, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
					if proved := a.PrevLogEntry + uint64(len(a.Entries)); a.LeaderCommitIndex > proved {
						a.LeaderCommitIndex = proved
					}
				}
				select {
				case c.rpcs <- rpc:
				case <-c.stop:
					return
				}
			case <-c.stop:
				return
			}
		}
	}()
	return c
}

func (c *clampingTransport) Consumer() <-chan raft.RPC { return c.rpcs }

// deposedLeader starts a Raft node whose log is that of a leader of term
// 2 that was deposed before replicating its last two entries: indexes 1-3
// are the cluster's (term 1), 4 and 5 only its own (term 2).
func deposedLeader(t *testing.T, wrap func(raft.Transport) raft.Transport) (*raft.Raft, *appliedFSM, *raft.InmemTransport) {
	logs, stable := raft.NewInmemStore(), raft.NewInmemStore()
	addr, trans := raft.NewInmemTransport("f")
	leaderAddr, leaderTrans := raft.NewInmemTransport("l")
	trans.Connect(leaderAddr, leaderTrans)
	leaderTrans.Connect(addr, trans)
	conf := raft.Configuration{Servers: []raft.Server{
		{ID: "f", Address: addr}, {ID: "l", Address: leaderAddr}, {ID: "x", Address: "x"}}}
	require.NoError(t, logs.StoreLogs([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(conf)},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("a")},
		{Index: 3, Term: 1, Type: raft.LogCommand, Data: []byte("b")},
		{Index: 4, Term: 2, Type: raft.LogCommand, Data: []byte("stale-4")},
		{Index: 5, Term: 2, Type: raft.LogCommand, Data: []byte("stale-5")},
	}))
	require.NoError(t, stable.SetUint64([]byte("CurrentTerm"), 2))
	cfg := raft.DefaultConfig()
	cfg.LocalID = "f"
	// No election of its own while the test speaks for the leader.
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 10*time.Second, 10*time.Second, time.Second
	cfg.Logger = nil
	cfg.LogOutput = io.Discard
	fsm := &appliedFSM{}
	var tr raft.Transport = trans
	if wrap != nil {
		tr = wrap(trans)
	}
	r, err := raft.NewRaft(cfg, fsm, logs, stable, raft.NewInmemSnapshotStore(), tr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	return r, fsm, leaderTrans
}

// appendEntries sends a request of the new leader (term 3) to the
// follower and returns whether it succeeded.
func appendEntries(t *testing.T, from *raft.InmemTransport, prev, prevTerm, commit uint64, entries ...*raft.Log) bool {
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("l"), Addr: []byte(from.LocalAddr())},
		Term:      3, PrevLogEntry: prev, PrevLogTerm: prevTerm, Entries: entries, LeaderCommitIndex: commit,
	}
	var resp raft.AppendEntriesResponse
	require.NoError(t, from.AppendEntries("f", "f", req, &resp))
	return resp.Success
}

// theNewLeadersTwoRequests: first an empty request that proves the log
// only up to index 3 but carries commit index 5 (the new leader committed
// its own entries 4 and 5 meanwhile), after which the follower has applied
// firstApplied entries; then the entries 4 and 5 themselves.
func theNewLeadersTwoRequests(t *testing.T, leader *raft.InmemTransport, fsm *appliedFSM, firstApplied int) {
	require.True(t, appendEntries(t, leader, 3, 1, 5), "the follower holds index 3 of term 1")
	waitApplied(t, fsm, firstApplied)
	require.True(t, appendEntries(t, leader, 3, 1, 5,
		&raft.Log{Index: 4, Term: 3, Type: raft.LogCommand, Data: []byte("new-4")},
		&raft.Log{Index: 5, Term: 3, Type: raft.LogCommand, Data: []byte("new-5")}))
}

// waitApplied waits until the FSM has applied n entries (Raft applies in
// its own goroutine); with commit index 5 nothing past index 5 can come.
func waitApplied(t *testing.T, fsm *appliedFSM, n int) []string {
	WaitFor(t, fmt.Sprintf("%d entries applied", n), 5*time.Second, func() bool { return len(fsm.list()) >= n })
	return fsm.list()
}

// TestRaftDeposedLeaderAppliesItsOwnStaleEntries documents the hazard in
// the Raft version in go.mod: if this test fails, the library now commits
// only what a request proves, and the guard may go.
func TestRaftDeposedLeaderAppliesItsOwnStaleEntries(t *testing.T) {
	_, fsm, leader := deposedLeader(t, nil)
	theNewLeadersTwoRequests(t, leader, fsm, 4)
	// The committed log is a, b, new-4, new-5; this replica applied its
	// own stale entries at 4 and 5 and never the leader's.
	require.Equal(t, []string{"2:a", "3:b", "4:stale-4", "5:stale-5"}, waitApplied(t, fsm, 4))
}

// TestClampedCommitIndexKeepsADeposedLeaderExact: with the guard, the
// same requests leave the replica with the leader's log applied.
func TestClampedCommitIndexKeepsADeposedLeaderExact(t *testing.T) {
	var c *clampingTransport
	_, fsm, leader := deposedLeader(t, func(tr raft.Transport) raft.Transport {
		c = newClampingTransport(tr)
		return c
	})
	t.Cleanup(func() { close(c.stop) })
	theNewLeadersTwoRequests(t, leader, fsm, 2)
	require.Equal(t, []string{"2:a", "3:b", "4:new-4", "5:new-5"}, waitApplied(t, fsm, 4))
}
