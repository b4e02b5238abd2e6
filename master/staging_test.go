package master

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/succession"
)

func TestCaughtUp(t *testing.T) {
	leader := succession.Position{Term: 5, Index: 1000}
	assert.True(t, caughtUp(succession.Position{Term: 5, Index: 1000}, false, leader))
	assert.True(t, caughtUp(succession.Position{Term: 5, Index: 1000 - stagingMaxTrail}, false, leader), "a few entries behind")
	assert.False(t, caughtUp(succession.Position{Term: 5, Index: 999 - stagingMaxTrail}, false, leader), "too far behind")
	assert.False(t, caughtUp(succession.Position{Term: 4, Index: 1000}, false, leader), "no entry of the leader's term yet")
	assert.False(t, caughtUp(succession.Position{}, false, leader), "an empty log")
	assert.False(t, caughtUp(succession.Position{Term: 5, Index: 1000}, true, leader), "it does not vote yet")
}

func TestStagerPromotesOnlyAfterStayingCaughtUp(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newStager(2 * time.Second)
	assert.False(t, s.promote("m4", true, t0), "caught up just now")
	assert.False(t, s.promote("m4", true, t0.Add(time.Second)))
	assert.False(t, s.promote("m4", false, t0.Add(1500*time.Millisecond)), "fell behind")
	assert.False(t, s.promote("m4", true, t0.Add(2*time.Second)), "caught up again: the wait starts over")
	assert.False(t, s.promote("m4", true, t0.Add(3900*time.Millisecond)))
	assert.True(t, s.promote("m4", true, t0.Add(4*time.Second)))
	assert.Empty(t, s.since, "promoted: forgotten")

	assert.False(t, s.promote("m5", true, t0))
	s.forget(map[raft.ServerID]bool{"m6": true})
	assert.Empty(t, s.since, "m5 is no longer staged (removed, or promoted by another leader)")
}

// peerVoter reports whether master id is in master i's Raft configuration,
// and as a voter.
func (c *testCluster) peerVoter(i int, id string) (in, voter bool) {
	f := c.masters[i].raft.GetConfiguration()
	require.NoError(c.t, f.Error())
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true, s.Suffrage == raft.Voter
		}
	}
	return false, false
}

// addMaster starts one more master that joins the cluster (no
// --bootstrap-expect) and returns its index.
func (c *testCluster) addMaster(tweaks ...func(*Config)) int {
	c.t.Helper()
	i := len(c.masters)
	cfg := c.cfgs[0]
	cfg.NodeID = "m" + string(rune('1'+i))
	cfg.DataDir = c.dir + "/" + cfg.NodeID
	cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr = freeAddr(c.t), freeAddr(c.t), freeAddr(c.t)
	cfg.BootstrapExpect = 0
	for _, f := range tweaks {
		f(&cfg)
	}
	c.cfgs = append(c.cfgs, cfg)
	c.masters = append(c.masters, nil)
	c.start(i)
	return i
}

// A master added to a running cluster is a non-voter until its log has
// caught up, and stays one while it has not been caught up for the
// staging time: the quorum is the founders' meanwhile.
func TestAnAddedMasterIsStagedBeforeItVotes(t *testing.T) {
	long := func(c *Config) { c.StagingStable = time.Hour }
	c := newTestCluster(t, 3, long)
	l := c.leader()
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/before"), []byte(simpleJob)))
	n := c.addMaster(long)
	id := c.masters[n].ID()
	waitFor(t, id+" in the configuration", func() bool { in, _ := c.peerVoter(l, id); return in })
	waitFor(t, id+" caught up", func() bool {
		return c.masters[n].raft.AppliedIndex() >= c.masters[l].raft.LastIndex()
	})
	_, voter := c.peerVoter(l, id)
	assert.False(t, voter, "a staged master does not vote")
	peers := decode[api.RaftPeers](t, do(t, "GET", c.url(l, "/v1/operator/raft/peers"), nil))
	require.Len(t, peers.Peers, 4)
	for _, p := range peers.Peers {
		assert.Equal(t, p.ID != id, p.Voter, "%s", p.ID)
	}
	// With one founder down the cluster still commits: its quorum is 2 of
	// the 3 voters, not 3 of 4.
	c.stop(c.follower())
	requireAccepted(t, do(t, "PUT", c.url(c.leader(), "/v1/jobs/after"), []byte(simpleJob)))
}

// Caught up for the staging time, an added master becomes a voter.
func TestAnAddedMasterVotesOnceCaughtUp(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	n := c.addMaster()
	id := c.masters[n].ID()
	waitFor(t, id+" a voter", func() bool { _, voter := c.peerVoter(l, id); return voter })
}
