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
//
// A Guard also holds a master's votes back while its log may lack entries
// it acknowledged (HoldVotes): a master started with an empty data
// directory under the id of a voter (its disk replaced, its directory
// wiped) is still counted by Raft, and would grant its vote to any
// candidate, since an empty log is behind every other. Two such votes'
// worth of forgotten acknowledgements let a candidate that lacks committed
// entries win, and those entries are lost. Held, the guard answers vote
// and pre-vote requests with an error (no vote), and notes the highest
// commit index leaders' requests name once it covers an entry of their own
// term (LeaderCommit); the master releases the votes once its log reaches
// that index (CaughtUp), or at once when it founds a new cluster (no voter
// of it ever acknowledged anything).
package raftguard

import (
	"errors"
	"sync"
	"sync/atomic"

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
	// held: vote requests are refused; commit: the highest commit index
	// a leader's AppendEntries named.
	held    atomic.Bool
	commit  atomic.Uint64
	refused atomic.Uint64
}

// ErrVotesHeld answers a vote request while the votes are held.
var ErrVotesHeld = errors.New("this master does not vote yet: it started with an empty Raft log, which may lack entries it acknowledged before, and no leader has brought it up to date")

// HoldVotes makes the guard refuse vote and pre-vote requests until
// ReleaseVotes.
func (g *Guard) HoldVotes() { g.held.Store(true) }

// ReleaseVotes lets vote requests through again; it reports whether they
// were held.
func (g *Guard) ReleaseVotes() bool { return g.held.Swap(false) }

// HoldingVotes reports whether the votes are held.
func (g *Guard) HoldingVotes() bool { return g.held.Load() }

// Refused counts the vote and pre-vote requests refused while held.
func (g *Guard) Refused() uint64 { return g.refused.Load() }

// LeaderCommit is the highest commit index a leader's AppendEntries
// request has named once that leader had committed an entry of its own
// term (OwnTermCommit; 0: none yet).
func (g *Guard) LeaderCommit() uint64 { return g.commit.Load() }

// OwnTermCommit is the leader's commit index when the request shows that
// it covers an entry of the leader's own term (its previous entry, or one
// of its entries, is of the request's term and at or below the commit
// index), else 0. Raft's leader commits only through an entry of its own
// term: until it has, its commit index may be one it had as a follower,
// below entries committed before it was elected.
func OwnTermCommit(a *raft.AppendEntriesRequest) uint64 {
	c := a.LeaderCommitIndex
	if a.PrevLogEntry > 0 && a.PrevLogTerm == a.Term && a.PrevLogEntry <= c {
		return c
	}
	for _, e := range a.Entries {
		if e.Term == a.Term && e.Index <= c {
			return c
		}
	}
	return 0
}

// CaughtUp reports whether a log whose last index is lastIndex holds every
// entry a leader had committed when it named leaderCommit: then it holds
// again whatever it had acknowledged before it was lost, and may vote.
func CaughtUp(lastIndex, leaderCommit uint64) bool {
	return leaderCommit > 0 && lastIndex >= leaderCommit
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
			switch c := rpc.Command.(type) {
			case *raft.AppendEntriesRequest:
				if at := OwnTermCommit(c); at > 0 {
					for seen := g.commit.Load(); at > seen && !g.commit.CompareAndSwap(seen, at); {
						seen = g.commit.Load()
					}
				}
				c.LeaderCommitIndex = ProvedCommit(c)
			case *raft.RequestVoteRequest, *raft.RequestPreVoteRequest:
				if g.held.Load() {
					g.refused.Add(1)
					rpc.Respond(nil, ErrVotesHeld)
					continue
				}
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
