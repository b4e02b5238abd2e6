// Package raftguard keeps a Raft follower from committing more than an
// AppendEntries request proves.
//
// hashicorp/raft (v1.8.0) sets a follower's commit index to
// min(LeaderCommitIndex, the follower's own last index). The Raft paper's
// rule is min(leaderCommit, index of the last new entry): only what the
// request has just shown to be the leader's may be committed. The two
// differ on a deposed leader (paused or cut off while it led) that holds
// entries of its own term that were never replicated: a request of the new
// leader that proves less than the new leader's commit index without
// touching those entries (an empty one whose previous entry is the new
// leader's last before its first entry, built while its commit index moved
// on — which Raft's leader does when its replication goroutine stalls
// between reading its last index and its commit index) makes the deposed
// leader apply its own stale entries; when the new leader's entries later
// replace them in its log, it never applies those, and keeps another state
// at the same applied index for good.
//
// A Guard sits between Raft and its transport and lowers each incoming
// request's commit index to what it proves (ProvedCommit) before Raft sees
// it. Committing less than the leader's commit index is always safe, and
// the next request carries the rest: a follower the leader keeps up to date
// is sent requests whose previous entry is the leader's last, which prove
// everything committed. Heartbeats carry no commit index and keep their
// fast path (the transport hands them to Raft directly).
package raftguard

import (
	"sync"

	"github.com/hashicorp/raft"
)

// Transport is a transport Raft can be given behind a guard: it can be
// closed and carries pre-votes (raft.NetworkTransport and
// raft.InmemTransport are).
type Transport interface {
	raft.Transport
	raft.WithClose
	raft.WithPreVote
}

// Guard is a guarded transport. Give it to raft.NewRaft in place of the
// transport it wraps, and Close it in the transport's place.
type Guard struct {
	Transport
	rpcs chan raft.RPC
	stop chan struct{}
	once sync.Once
}

// New starts a guard in front of t's consumer channel.
func New(t Transport) *Guard {
	g := &Guard{Transport: t, rpcs: make(chan raft.RPC), stop: make(chan struct{})}
	go g.run(t.Consumer())
	return g
}

func (g *Guard) run(in <-chan raft.RPC) {
	for {
		select {
		case rpc := <-in:
			if a, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
				a.LeaderCommitIndex = ProvedCommit(a)
			}
			select {
			case g.rpcs <- rpc:
			case <-g.stop:
				return
			}
		case <-g.stop:
			return
		}
	}
}

// ProvedCommit is the commit index a follower may take from an
// AppendEntries request: the leader's, at most the index of the last entry
// the request proves (its previous entry, or its last entry).
func ProvedCommit(a *raft.AppendEntriesRequest) uint64 {
	proved := a.PrevLogEntry
	if n := len(a.Entries); n > 0 {
		proved = a.Entries[n-1].Index
	}
	return min(a.LeaderCommitIndex, proved)
}

// Consumer is where Raft reads requests: through the guard.
func (g *Guard) Consumer() <-chan raft.RPC { return g.rpcs }

// Close stops the guard and closes the transport.
func (g *Guard) Close() error {
	g.once.Do(func() { close(g.stop) })
	return g.Transport.Close()
}
