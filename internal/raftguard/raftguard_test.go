package raftguard

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"jobmaster/internal/freeport"
)

func TestProvedCommit(t *testing.T) {
	entries := func(from, to uint64) []*raft.Log {
		var out []*raft.Log
		for i := from; i <= to; i++ {
			out = append(out, &raft.Log{Index: i})
		}
		return out
	}
	for _, c := range []struct {
		name    string
		prev    uint64
		entries []*raft.Log
		commit  uint64
		want    uint64
	}{
		{"up to date: the previous entry is the leader's last", 9, nil, 7, 7},
		{"empty, behind the commit index: only what it proves", 3, nil, 5, 3},
		{"entries cover the commit index", 3, entries(4, 6), 5, 5},
		{"entries stop short of it", 3, entries(4, 4), 6, 4},
		{"no commit index (a heartbeat)", 0, nil, 0, 0},
	} {
		got := ProvedCommit(&raft.AppendEntriesRequest{PrevLogEntry: c.prev, Entries: c.entries, LeaderCommitIndex: c.commit})
		require.Equal(t, c.want, got, c.name)
	}
}

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
func (f *appliedFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, fmt.Errorf("no snapshots") }
func (f *appliedFSM) Restore(io.ReadCloser) error         { return fmt.Errorf("no snapshots") }
func (f *appliedFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.applied...)
}

// deposedLeader starts a Raft node on a real TCP transport whose log is
// that of a leader of term 2 deposed before it replicated its last two
// entries: indexes 1-3 are the cluster's (term 1), 4 and 5 only its own.
// With guarded, the transport goes through a Guard. It
// returns the node's FSM, its address and a transport to speak for the
// new leader with.
func deposedLeader(t *testing.T, guarded bool) (*appliedFSM, raft.ServerAddress, *raft.NetworkTransport) {
	logs, stable := raft.NewInmemStore(), raft.NewInmemStore()
	addr := freeport.Must(t)
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	require.NoError(t, err)
	trans, err := raft.NewTCPTransport(addr, tcp, 2, 5*time.Second, io.Discard)
	require.NoError(t, err)
	leaderAddr := freeport.Must(t)
	ltcp, err := net.ResolveTCPAddr("tcp", leaderAddr)
	require.NoError(t, err)
	leader, err := raft.NewTCPTransport(leaderAddr, ltcp, 2, 5*time.Second, io.Discard)
	require.NoError(t, err)
	conf := raft.Configuration{Servers: []raft.Server{
		{ID: "f", Address: raft.ServerAddress(addr)}, {ID: "l", Address: raft.ServerAddress(leaderAddr)}, {ID: "x", Address: "127.0.0.1:1"}}}
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
	cfg.LogOutput = io.Discard
	fsm := &appliedFSM{}
	var tr raft.Transport = trans
	var guard *Guard
	if guarded {
		guard = New(trans)
		tr = guard
	}
	r, err := raft.NewRaft(cfg, fsm, logs, stable, raft.NewInmemSnapshotStore(), tr)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = r.Shutdown().Error()
		trans.CloseStreams()
		if guard != nil {
			_ = guard.Close()
		} else {
			_ = trans.Close()
		}
		leader.CloseStreams()
		_ = leader.Close()
	})
	return fsm, raft.ServerAddress(addr), leader
}

// send is one AppendEntries request of the new leader (term 3).
func send(t *testing.T, leader *raft.NetworkTransport, to raft.ServerAddress, prev, prevTerm, commit uint64, entries ...*raft.Log) {
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("l"), Addr: []byte(leader.LocalAddr())},
		Term:      3, PrevLogEntry: prev, PrevLogTerm: prevTerm, Entries: entries, LeaderCommitIndex: commit,
	}
	var resp raft.AppendEntriesResponse
	require.NoError(t, leader.AppendEntries("f", to, req, &resp))
	require.True(t, resp.Success, "the follower holds index %d of term %d", prev, prevTerm)
}

// theNewLeadersTwoRequests: an empty request that proves the log up to
// index 3 but carries commit index 5 (the new leader committed its entries
// 4 and 5 meanwhile), then those entries.
func theNewLeadersTwoRequests(t *testing.T, fsm *appliedFSM, to raft.ServerAddress, leader *raft.NetworkTransport, firstApplied int) []string {
	send(t, leader, to, 3, 1, 5)
	waitApplied(t, fsm, firstApplied)
	send(t, leader, to, 3, 1, 5,
		&raft.Log{Index: 4, Term: 3, Type: raft.LogCommand, Data: []byte("new-4")},
		&raft.Log{Index: 5, Term: 3, Type: raft.LogCommand, Data: []byte("new-5")})
	return waitApplied(t, fsm, 4)
}

func waitApplied(t *testing.T, fsm *appliedFSM, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(fsm.list()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries applied, want %d: %v", len(fsm.list()), n, fsm.list())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fsm.list()
}

// TestCommitGuardKeepsADeposedLeaderExact: through the guard, the deposed
// leader applies the new leader's entries at 4 and 5, never its own.
func TestCommitGuardKeepsADeposedLeaderExact(t *testing.T) {
	fsm, addr, leader := deposedLeader(t, true)
	require.Equal(t, []string{"2:a", "3:b", "4:new-4", "5:new-5"}, theNewLeadersTwoRequests(t, fsm, addr, leader, 2))
}

// TestRaftWithoutTheGuardAppliesStaleEntries documents the hazard in the
// Raft version in go.mod: if it fails, the library commits only what a
// request proves, and the guard may go.
func TestRaftWithoutTheGuardAppliesStaleEntries(t *testing.T) {
	fsm, addr, leader := deposedLeader(t, false)
	require.Equal(t, []string{"2:a", "3:b", "4:stale-4", "5:stale-5"}, theNewLeadersTwoRequests(t, fsm, addr, leader, 4))
}

// A guard that holds the votes answers vote and pre-vote requests with
// ErrVotesHeld (no vote), and passes everything else on; it notes the
// highest commit index leaders name, and lets votes through once released.
func TestHeldVotesAreRefused(t *testing.T) {
	_, theirs := raft.NewInmemTransport("them")
	_, mine := raft.NewInmemTransport("me")
	theirs.Connect("me", mine)
	g := New(mine)
	t.Cleanup(func() { _ = g.Close() })
	g.HoldVotes()
	go func() { // what Raft would do: answer what reaches it
		for rpc := range g.Consumer() {
			switch rpc.Command.(type) {
			case *raft.AppendEntriesRequest:
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
			case *raft.RequestPreVoteRequest:
				rpc.Respond(&raft.RequestPreVoteResponse{Granted: true}, nil)
			}
		}
	}()
	vote := func() (bool, error) {
		var resp raft.RequestVoteResponse
		err := theirs.RequestVote("me", "me", &raft.RequestVoteRequest{Term: 2}, &resp)
		return resp.Granted, err
	}
	preVote := func() error {
		var resp raft.RequestPreVoteResponse
		return theirs.RequestPreVote("me", "me", &raft.RequestPreVoteRequest{Term: 2}, &resp)
	}
	_, err := vote()
	require.ErrorContains(t, err, "does not vote yet")
	require.ErrorContains(t, preVote(), "does not vote yet")
	require.EqualValues(t, 2, g.Refused())

	var ae raft.AppendEntriesResponse
	send := func(r *raft.AppendEntriesRequest) {
		require.NoError(t, theirs.AppendEntries("me", "me", r, &ae))
	}
	send(&raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 9, PrevLogTerm: 1, LeaderCommitIndex: 7})
	require.Zero(t, g.LeaderCommit(), "a leader that has not committed in its own term: its commit index may lag")
	send(&raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 6, PrevLogTerm: 2, LeaderCommitIndex: 7})
	send(&raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 6, PrevLogTerm: 2, LeaderCommitIndex: 5})
	require.EqualValues(t, 7, g.LeaderCommit(), "the highest named")
	send(&raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 7, PrevLogTerm: 2, LeaderCommitIndex: 9,
		Entries: []*raft.Log{{Index: 8, Term: 3}, {Index: 9, Term: 3}}})
	require.EqualValues(t, 9, g.LeaderCommit(), "proven by its entries")
	send(&raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 9, PrevLogTerm: 3, LeaderCommitIndex: 7})
	require.EqualValues(t, 9, g.LeaderCommit(), "never lowered")
	require.False(t, CaughtUp(8, g.LeaderCommit()))
	require.True(t, CaughtUp(9, g.LeaderCommit()))
	require.False(t, CaughtUp(0, 0), "no leader heard: not caught up")

	require.True(t, g.ReleaseVotes())
	require.False(t, g.ReleaseVotes(), "once")
	granted, err := vote()
	require.NoError(t, err)
	require.True(t, granted, "released: the request reaches Raft")
	require.NoError(t, preVote())
}
