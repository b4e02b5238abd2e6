package master

import (
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/succession"
)

// Staging of masters added to a running cluster (docs/operations.md,
// "Adding a master"). The leader adds a new master as a non-voter: Raft
// sends it the log but does not count it, so the quorum stays that of the
// voters while it catches up. (A new master votes only once its log holds
// what a leader had committed, raftguard; a voter that cannot vote yet
// would raise the quorum with nothing behind it: with 3 masters and a 4th
// added, one more failure during its catch-up would leave no quorum.)
// Once its log has caught up with the leader's and stayed caught up for
// StagingStable, the leader makes it a voter.

const (
	// defaultStagingStable: how long a staged master stays caught up
	// before it votes.
	defaultStagingStable = 2 * time.Second
	// stagingMaxTrail: how many entries a staged master's log may lack of
	// the leader's and still count as caught up (entries written while
	// the leader asked).
	stagingMaxTrail = 256
)

// caughtUp reports whether a master whose log ends at p, and that votes
// (!holdsVotes), has caught up with a leader whose log ends at leader: an
// entry of the leader's term, within stagingMaxTrail entries of the
// leader's last. A master that holds its votes yet (its log was empty, and
// no leader has said it holds what was committed: raftguard) would count
// in the quorum without voting.
func caughtUp(p succession.Position, holdsVotes bool, leader succession.Position) bool {
	return !holdsVotes && p.Term == leader.Term && p.Index+stagingMaxTrail >= leader.Index
}

// stager remembers, through one leadership session, since when each staged
// master has been caught up.
type stager struct {
	stable time.Duration
	since  map[raft.ServerID]time.Time
}

func newStager(stable time.Duration) *stager {
	return &stager{stable: stable, since: make(map[raft.ServerID]time.Time)}
}

// promote decides, at now, whether the staged master id, caught up or not
// (caught), becomes a voter: it has been caught up at every check for
// s.stable.
func (s *stager) promote(id raft.ServerID, caught bool, now time.Time) bool {
	if !caught {
		delete(s.since, id)
		return false
	}
	t, ok := s.since[id]
	if !ok {
		s.since[id] = now
		t = now
	}
	if now.Sub(t) < s.stable {
		return false
	}
	delete(s.since, id)
	return true
}

// forget drops what the stager knows of masters no longer staged.
func (s *stager) forget(staged map[raft.ServerID]bool) {
	for id := range s.since {
		if !staged[id] {
			delete(s.since, id)
		}
	}
}
