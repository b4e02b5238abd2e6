package master

import (
	"net/http"
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
