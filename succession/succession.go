// Package succession decides, on a follower, when its leader's process is
// worth probing and, once a probe shows that process gone, which surviving
// master stands for election at once instead of waiting out Raft's
// heartbeat timeout.
//
// Raft detects a dead leader only by silence: a follower waits for its
// heartbeat timeout (250 ms, randomized up to twice that) and, since
// hashicorp/raft refuses to vote while it still has a leader, an election
// is won only once a quorum of followers has each timed out on its own.
// Most of a failover is that wait. Yet when the leader's process dies (a
// crash, kill -9, an OOM kill) its host says so at once: a connection to
// its Raft port is refused. A refusal is evidence, not suspicion: a live
// process, even a paused or starved one, has its listening socket accepted
// by the kernel. So succession acts only on a refusal, and silence alone
// (a paused leader, a cut network, a dead host) still takes Raft's normal
// way.
//
// On a refusal every survivor asks the others for their log position and
// whether they too are refused, and the one whose log is the most up to
// date (the greatest last term, then the greatest last index; the smallest
// id among equals) stands: its Raft becomes a candidate as a leadership
// transfer makes one (the TimeoutNow request), so the other survivors vote
// for it although they have not yet timed out on the old leader. No one
// stands while another survivor's own connection to the leader is
// accepted: a refusal on one path alone (a firewall rejecting one
// master's connections) is not the process gone. Every survivor computes
// the same nominee from the same positions, so when every survivor
// answers, one stands and no vote splits. Raft's safety does not rest on
// any of this: the vote still requires a log at least as up to date as
// the voter's and one vote per term, and a wrong guess (a nominee whose
// log is behind, a position that moved) costs one failed election, after
// which Raft's timeouts take over as before.
//
// Nothing here does I/O or reads a clock; package master feeds it (master/succession.go).
//
// # Vocabulary
//
//   - position: a master's last log entry (its term and index), as Raft's
//     vote compares logs.
//   - probe: a TCP connection to the leader's Raft address; refused means
//     the process is gone.
//   - stand: become a candidate now, as the target of a leadership
//     transfer.
package succession

import (
	"cmp"
	"time"
)

// Timing of the probes, for a leader that heartbeats every HeartbeatTimeout
// / 10 to HeartbeatTimeout / 5 (hashicorp/raft's replication heartbeat).
type Timing struct {
	// ProbeAfter: probe once the leader has been silent this long.
	ProbeAfter time.Duration
	// ProbeEvery: while it stays silent, probe again this often.
	ProbeEvery time.Duration
}

// TimingFor is the timing for Raft's heartbeat timeout hb: probe after a
// little more than the longest gap between two heartbeats (hb / 5), and
// again every tenth of hb. A live leader answers a probe, so probing early
// costs a connection, never an election.
func TimingFor(hb time.Duration) Timing {
	return Timing{ProbeAfter: hb/5 + hb/20, ProbeEvery: hb / 10}
}

// Follower is what a follower knows of its leader, at Now.
type Follower struct {
	Now time.Time
	// Leader is the leader's id ("" when there is none).
	Leader string
	// LastContact is when the leader was last heard from.
	LastContact time.Time
	// LastProbe is when the leader was last probed (zero: never).
	LastProbe time.Time
}

// ShouldProbe reports whether to probe the leader now: there is one, it
// has been silent for ProbeAfter, and it was not probed in the last
// ProbeEvery.
func (t Timing) ShouldProbe(f Follower) bool {
	if f.Leader == "" || f.Now.Sub(f.LastContact) < t.ProbeAfter {
		return false
	}
	return f.LastProbe.IsZero() || f.Now.Sub(f.LastProbe) >= t.ProbeEvery
}

// Position is a master's last log entry, and what its own probe of the
// leader found.
type Position struct {
	ID    string
	Term  uint64 // of the last entry
	Index uint64 // of the last entry
	// Reaches: this survivor's own connection to the leader's Raft port
	// was accepted just now. One survivor's refusal may be its own path's
	// (a firewall that rejects its connections alone, while the leader's
	// heartbeats still reach it); while another survivor reaches the
	// leader, no one stands.
	Reaches bool
}

// ahead reports whether a's log wins over b's: a later last term, then a
// greater last index (Raft's vote rule), then, between equal logs, the
// smaller id.
func ahead(a, b Position) bool {
	if c := cmp.Compare(a.Term, b.Term); c != 0 {
		return c > 0
	}
	if c := cmp.Compare(a.Index, b.Index); c != 0 {
		return c > 0
	}
	return a.ID < b.ID
}

// Decision is what a survivor does once its leader's process is gone.
type Decision struct {
	// Stand: become a candidate now.
	Stand bool
	// Nominee is the survivor that should stand ("" when none may).
	Nominee string
	// Reason says why, for the log.
	Reason string
}

// Decide is the decision of survivor self, whose leader's process is gone,
// given the positions of the other survivors that answered (peers) and the
// number of voters in the configuration, the dead leader included. No one
// stands unless self and the peers that answered are a quorum of voters:
// an election they cannot win is not worth a term. Otherwise the survivor
// whose log is ahead of every other stands.
func Decide(self Position, peers []Position, voters int) Decision {
	if 1+len(peers) < voters/2+1 {
		return Decision{Reason: "too few survivors answered to win an election"}
	}
	for _, p := range peers {
		if p.Reaches {
			return Decision{Reason: "survivor " + p.ID + " still reaches the leader's process: the refusal was this master's path's alone"}
		}
	}
	best := self
	for _, p := range peers {
		if ahead(p, best) {
			best = p
		}
	}
	// A tie of logs goes to the smaller id: say so, not "ahead". Only a
	// tie of this master's log with the best one matters here.
	even := func(p Position) bool { return p.Term == best.Term && p.Index == best.Index }
	tied := false
	if best.ID != self.ID {
		tied = even(self)
	} else {
		for _, p := range peers {
			tied = tied || even(p)
		}
	}
	switch {
	case best.ID != self.ID && tied:
		return Decision{Nominee: best.ID, Reason: "survivor " + best.ID + "'s log is as far as this master's and its id is smaller"}
	case best.ID != self.ID:
		return Decision{Nominee: best.ID, Reason: "survivor " + best.ID + "'s log is ahead"}
	case tied:
		return Decision{Stand: true, Nominee: self.ID, Reason: "no survivor's log is ahead of this master's, and of those as far its id is the smallest"}
	}
	return Decision{Stand: true, Nominee: self.ID, Reason: "this master's log is ahead of every survivor's"}
}
