package master

import (
	"sync"

	"github.com/hashicorp/raft"
)

// commitGuard wraps the Raft transport of a master so that no
// AppendEntries request makes it commit more than the request proves.
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
// on) makes the deposed leader apply its own stale entries; when the new
// leader's entries later replace them in its log, it never applies those,
// and keeps another state at the same applied index for good.
//
// The guard lowers each incoming request's commit index to what it proves
// (provedCommit) before Raft sees it. Committing less than the leader's
// commit index is always safe, and the next request carries the rest: a
// follower the leader keeps up to date is sent requests whose previous
// entry is the leader's last, which prove everything committed.
// Heartbeats carry no commit index and keep their fast path.
type commitGuard struct {
	*raft.NetworkTransport
	rpcs chan raft.RPC
	stop chan struct{}
	once sync.Once
}

// guardCommits starts the guard in front of t's consumer channel.
func guardCommits(t *raft.NetworkTransport) *commitGuard {
	g := &commitGuard{NetworkTransport: t, rpcs: make(chan raft.RPC), stop: make(chan struct{})}
	go g.run(t.Consumer())
	return g
}

func (g *commitGuard) run(in <-chan raft.RPC) {
	for {
		select {
		case rpc := <-in:
			if a, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
				a.LeaderCommitIndex = provedCommit(a)
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

// provedCommit is the commit index a follower may take from an
// AppendEntries request: the leader's, at most the index of the last entry
// the request proves (its previous entry, or its last entry).
func provedCommit(a *raft.AppendEntriesRequest) uint64 {
	proved := a.PrevLogEntry
	if n := len(a.Entries); n > 0 {
		proved = a.Entries[n-1].Index
	}
	return min(a.LeaderCommitIndex, proved)
}

// Consumer is where Raft reads requests: through the guard.
func (g *commitGuard) Consumer() <-chan raft.RPC { return g.rpcs }

// Close stops the guard and closes the transport.
func (g *commitGuard) Close() error {
	g.once.Do(func() { close(g.stop) })
	return g.NetworkTransport.Close()
}
