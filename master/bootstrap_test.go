package master

import (
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"jobmaster/membership"
)

func member(id string, status string, inCluster bool) membership.Member {
	return membership.Member{ID: id, Status: status, Meta: membership.Meta{Role: membership.RoleMaster, RaftAddr: id + ":1", InCluster: inCluster}}
}

func TestBootstrapServers(t *testing.T) {
	alive := membership.StatusAlive
	three := []membership.Member{member("m3", alive, false), member("m1", alive, false), member("m2", alive, false)}
	servers, ok := bootstrapServers(three, 3)
	require.True(t, ok)
	require.Equal(t, []raft.ServerID{"m1", "m2", "m3"}, []raft.ServerID{servers[0].ID, servers[1].ID, servers[2].ID})
	require.Equal(t, raft.ServerAddress("m1:1"), servers[0].Address)

	_, ok = bootstrapServers(three[:2], 3)
	require.False(t, ok, "too few")
	_, ok = bootstrapServers(three, 0)
	require.False(t, ok, "bootstrap disabled")
	_, ok = bootstrapServers(append(three[:2:2], member("m3", membership.StatusDead, false)), 3)
	require.False(t, ok, "dead members do not count")
	_, ok = bootstrapServers(append(three[:2:2], member("m3", alive, true)), 2)
	require.False(t, ok, "an existing cluster is never bootstrapped again")
	ex := membership.Member{ID: "e1", Status: alive, Meta: membership.Meta{Role: membership.RoleExecutor}}
	_, ok = bootstrapServers(append(three[:2:2], ex), 3)
	require.False(t, ok, "executors do not count")
}
