package master

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"jobmaster/membership"
)

func member(id string, status string, inCluster bool) membership.Member {
	return membership.Member{ID: id, Status: status, Meta: membership.Meta{Role: membership.RoleMaster, RaftAddr: id + ":1", InCluster: inCluster}}
}

// agreeing returns the members, each gossiping proposal.
func agreeing(ms []membership.Member, proposal string) []membership.Member {
	out := make([]membership.Member, len(ms))
	for i, m := range ms {
		m.Meta.Bootstrap = proposal
		out[i] = m
	}
	return out
}

func TestBootstrapDecision(t *testing.T) {
	alive := membership.StatusAlive
	three := []membership.Member{member("m3", alive, false), member("m1", alive, false), member("m2", alive, false)}

	// Each proposes the same set; only the lowest bootstraps, and only once
	// the others gossip that they propose it too.
	p1, _, ok := bootstrapDecision("m1", three, 3)
	require.False(t, ok, "the others have not agreed yet")
	require.NotEmpty(t, p1)
	p2, _, ok := bootstrapDecision("m2", three, 3)
	require.False(t, ok, "m2 is not the lowest")
	require.Equal(t, p1, p2, "every master proposes the same set")
	p, servers, ok := bootstrapDecision("m1", agreeing(three, p1), 3)
	require.True(t, ok)
	require.Equal(t, p1, p)
	require.Equal(t, []raft.ServerID{"m1", "m2", "m3"}, []raft.ServerID{servers[0].ID, servers[1].ID, servers[2].ID})
	require.Equal(t, raft.ServerAddress("m1:1"), servers[0].Address)
	_, _, ok = bootstrapDecision("m2", agreeing(three, p1), 3)
	require.False(t, ok, "only the lowest bootstraps")

	// Five seen with an expect of three: the first three, once they agree.
	five := append(agreeing(three, p1), member("m4", alive, false), member("m0", alive, false))
	p0, _, ok := bootstrapDecision("m1", five, 3)
	require.False(t, ok, "m0 is lower: m1 waits")
	require.NotEqual(t, p1, p0)
	_, servers, ok = bootstrapDecision("m0", agreeing(five, p0), 3)
	require.True(t, ok)
	require.Equal(t, []raft.ServerID{"m0", "m1", "m2"}, []raft.ServerID{servers[0].ID, servers[1].ID, servers[2].ID})

	// A set whose members disagree is not bootstrapped.
	mixed := agreeing(three, p1)
	mixed[0].Meta.Bootstrap = "something else"
	_, _, ok = bootstrapDecision("m1", mixed, 3)
	require.False(t, ok)

	p, _, ok = bootstrapDecision("m1", three[:2], 3)
	require.False(t, ok, "too few")
	require.Empty(t, p)
	_, _, ok = bootstrapDecision("m1", agreeing(three, p1), 0)
	require.False(t, ok, "bootstrap disabled")
	_, _, ok = bootstrapDecision("m1", append(agreeing(three[:2:2], p1), member("m3", membership.StatusDead, false)), 3)
	require.False(t, ok, "dead members do not count")
	p, _, ok = bootstrapDecision("m1", append(agreeing(three[:2:2], p1), member("m3", alive, true)), 2)
	require.False(t, ok, "an existing cluster is never bootstrapped again")
	require.Empty(t, p)
	ex := membership.Member{ID: "e0", Status: alive, Meta: membership.Meta{Role: membership.RoleExecutor}}
	_, _, ok = bootstrapDecision("m1", append(agreeing(three[:2:2], p1), ex), 3)
	require.False(t, ok, "executors do not count")
}

// A new cluster bootstraps without gossip carrying the masters'
// proposals: with gossip, probes and the periodic state exchange an hour
// apart (as when the packets of the proposals' updates are lost), each
// master pushes its proposal to the others, and the lowest id sees them
// all. Gossiped alone, a lost update held new clusters back until the
// next exchange, 5 s later.
func TestBootstrapDoesNotWaitForGossip(t *testing.T) {
	quiet := &membership.Timings{ProbeInterval: time.Hour, ProbeTimeout: time.Second, GossipInterval: time.Hour,
		PushPullInterval: time.Hour, SuspicionMult: 4, RetransmitMult: 1, UDPBufferSize: 1400}
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.GossipTimings = quiet })
	c.leader()
}
