package master

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// A master whose data directory was lost, started again empty under its
// id while still a voter, does not vote until a leader has brought its log
// up to date: its vote would let a master that lacks what it had
// acknowledged become leader, and those writes would be lost.
//
// m_l leads; with m_y stopped, a job is committed on m_l and m_x only. m_x
// loses its disk, m_l stops. m_y (which never saw the job) and the empty
// m_x would elect m_y without it: m_x refuses m_y's vote requests. Once
// m_l is back, it leads, brings m_x up to date, and the job is everywhere.
func TestAMasterThatLostItsLogVotesOnlyOnceCaughtUp(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	x := (l + 1) % 3
	y := (l + 2) % 3
	c.stop(y)
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/acknowledged"), []byte(simpleJob)))
	c.wipe(x)
	c.stop(l)

	c.start(y)
	c.start(x)
	guard := c.masters[x].rp.guard
	require.True(t, guard.HoldingVotes(), "it starts empty")
	waitFor(t, "m_y's vote requests refused by the empty master", func() bool { return guard.Refused() >= 2 })
	require.NotEqual(t, raft.Leader, c.masters[y].raft.State(), "no leader without the job")

	c.start(l)
	waitFor(t, "the empty master caught up and voting", func() bool { return !guard.HoldingVotes() })
	c.leader()
	for i := range c.masters {
		waitFor(t, "the acknowledged job on every master", func() bool {
			return do(t, "GET", c.url(i, "/v1/jobs/acknowledged?stale"), nil).status == http.StatusOK
		})
	}
}

// Founders of a new cluster that restart before their first entry (a
// crash loop at boot) still vote: each wrote the vote marker before it
// gossiped its proposal, so two of three held would not keep the new
// cluster without a leader. A master with Raft state drops the marker.
func TestFoundersRestartedEmptyStillVote(t *testing.T) {
	c := newTestCluster(t, 3)
	c.leader()
	for i := range c.masters {
		require.False(t, c.masters[i].rp.guard.HoldingVotes(), "m%d founded the cluster", i+1)
	}
	// m2 and m3 as if they had restarted before their first entry: no
	// Raft state, but the marker a founder writes.
	for _, i := range []int{1, 2} {
		c.wipe(i)
		raftDir := filepath.Join(c.cfgs[i].DataDir, "raft")
		require.NoError(t, os.MkdirAll(raftDir, 0o700))
		require.NoError(t, markVoter(raftDir))
	}
	c.stop(0)
	c.wipe(0) // and m1 too: a cluster of three founders, all empty again
	raftDir := filepath.Join(c.cfgs[0].DataDir, "raft")
	require.NoError(t, os.MkdirAll(raftDir, 0o700))
	require.NoError(t, markVoter(raftDir))
	for i := range c.masters {
		c.start(i)
		require.False(t, c.masters[i].rp.guard.HoldingVotes(), "m%d has the marker", i+1)
	}
	// Without the marker, an empty master holds its votes (the others
	// stopped meanwhile: with a leader there, it could catch up and vote
	// before it is looked at), until it has caught up.
	c.leader()
	c.stop(0)
	c.stop(1)
	c.wipe(2)
	c.start(2)
	require.True(t, c.masters[2].rp.guard.HoldingVotes())
	c.start(0)
	c.start(1)
	// With Raft state, the marker is dropped.
	l := c.leader()
	waitFor(t, "m3 caught up and voting", func() bool { return !c.masters[2].rp.guard.HoldingVotes() })
	c.stop(l)
	c.start(l)
	_, err := os.Lstat(filepath.Join(c.cfgs[l].DataDir, "raft", voteMarker))
	require.ErrorIs(t, err, os.ErrNotExist, "a master with Raft state keeps no marker")
}

// When two masters of three lost their data directories and the third
// holds every entry, the operator lets one of them vote by creating the
// vote marker (accepting that what only the emptied masters held is lost):
// the master with every entry is elected, and the job it holds is kept.
func TestAnOperatorLetsAnEmptyMasterVote(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/kept"), []byte(simpleJob)))
	c.waitSameState()
	x, y := (l+1)%3, (l+2)%3
	c.wipe(x)
	c.wipe(y)
	c.stop(l)
	c.start(l)
	c.start(y)
	require.True(t, c.masters[y].rp.guard.HoldingVotes())
	c.stop(x)
	raftDir := filepath.Join(c.cfgs[x].DataDir, "raft")
	require.NoError(t, os.MkdirAll(raftDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(raftDir, voteMarker), nil, 0o600)) // what the docs tell the operator
	c.start(x)
	require.False(t, c.masters[x].rp.guard.HoldingVotes())
	require.Equal(t, l, c.leader(), "the master that holds every entry leads")
	for i := range c.masters {
		waitFor(t, "the job on every master", func() bool {
			return do(t, "GET", c.url(i, "/v1/jobs/kept?stale"), nil).status == http.StatusOK
		})
	}
}

// A founder's marker goes once its log holds an entry: left beside the
// log, it would let the master vote at once should the log alone be lost
// later (raft.db and the snapshots deleted, the marker not), and a master
// that never saw an acknowledged job could be elected.
func TestAFoundersMarkerGoesOnceItsLogHoldsAnEntry(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	for i := range c.masters {
		waitFor(t, "the founders' markers gone", func() bool {
			return !fileExists(filepath.Join(c.cfgs[i].DataDir, "raft", voteMarker))
		})
	}
	x, y := (l+1)%3, (l+2)%3
	c.stop(y)
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/acknowledged"), []byte(simpleJob)))
	c.stop(x)
	raftDir := filepath.Join(c.cfgs[x].DataDir, "raft")
	require.NoError(t, os.Remove(filepath.Join(raftDir, "raft.db")))
	require.NoError(t, os.RemoveAll(filepath.Join(raftDir, "snapshots")))
	c.stop(l)
	c.start(y)
	c.start(x)
	require.True(t, c.masters[x].rp.guard.HoldingVotes(), "its log lost, it holds its votes")
	guard := c.masters[x].rp.guard
	waitFor(t, "the stale master's vote requests refused", func() bool { return guard.Refused() >= 2 })
	require.NotEqual(t, raft.Leader, c.masters[y].raft.State(), "no leader without the job")
}
