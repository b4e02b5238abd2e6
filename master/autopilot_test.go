package master

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"jobmaster/membership"
)

func voters(ids ...string) []raft.Server {
	var out []raft.Server
	for _, id := range ids {
		out = append(out, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1")})
	}
	return out
}

func TestDeadMasters(t *testing.T) {
	t0 := time.Unix(1000, 0)
	min := time.Minute
	five := voters("m1", "m2", "m3", "m4", "m5")
	last := map[raft.ServerID]time.Time{"m1": t0, "m2": t0, "m3": t0.Add(-2 * min), "m4": t0.Add(-3 * min), "m5": t0.Add(-30 * time.Second)}

	require.Empty(t, deadMasters(five, "m1", last, t0, 0, 2), "off")
	require.Equal(t, []raft.ServerID{"m4", "m3"}, deadMasters(five, "m1", last, t0, min, 2), "oldest first, past the threshold only")
	require.Equal(t, []raft.ServerID{"m4"}, deadMasters(five, "m1", last, t0, min, 4), "never below the floor")
	require.Empty(t, deadMasters(five, "m1", last, t0, min, 5))
	require.Empty(t, deadMasters(five, "m1", last, t0, 10*min, 2), "not silent long enough")
	// The leader never removes itself; a voter with no contact known counts
	// as alive; non-voters do not count.
	require.Equal(t, []raft.ServerID{"m3"}, deadMasters(five, "m4", map[raft.ServerID]time.Time{"m3": t0.Add(-2 * min), "m4": t0.Add(-3 * min)}, t0, min, 2))
	withNonvoter := append(voters("m1", "m2", "m3"), raft.Server{Suffrage: raft.Nonvoter, ID: "n1"})
	require.Empty(t, deadMasters(withNonvoter, "m1", map[raft.ServerID]time.Time{"m3": t0.Add(-2 * min)}, t0, min, quorumOf(3)+1))
	require.Equal(t, []raft.ServerID{"m3"}, deadMasters(withNonvoter, "m1", map[raft.ServerID]time.Time{"m3": t0.Add(-2 * min)}, t0, min, quorumOf(3)))
	// A dead non-voter (a master staged and lost before it voted) goes
	// too, whatever the floor: it counts for no quorum.
	deadNonvoter := map[raft.ServerID]time.Time{"n1": t0.Add(-2 * min), "m3": t0.Add(-2 * min)}
	require.Equal(t, []raft.ServerID{"n1"}, deadMasters(withNonvoter, "m1", deadNonvoter, t0, min, quorumOf(3)+1))
	require.Equal(t, []raft.ServerID{"n1", "m3"}, deadMasters(withNonvoter, "m1", deadNonvoter, t0, min, quorumOf(3)))
	require.Equal(t, 2, quorumOf(3))
	require.Equal(t, 3, quorumOf(5))
}

func TestContactTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := &contactTracker{missingSince: map[raft.ServerID]time.Time{}}
	members := []membership.Member{
		{ID: "m1", Status: membership.StatusAlive},
		{ID: "m2", Status: membership.StatusDead, Since: t0.Add(-time.Hour)},
	}
	servers := voters("m1", "m2", "m3")
	got := c.lastContact(servers, members, t0)
	require.Equal(t, map[raft.ServerID]time.Time{"m1": t0, "m2": t0.Add(-time.Hour), "m3": t0}, got)
	got = c.lastContact(servers, members, t0.Add(time.Minute))
	require.Equal(t, t0, got["m3"], "missing since the session first missed it")
	members = append(members, membership.Member{ID: "m3", Status: membership.StatusAlive})
	got = c.lastContact(servers, members, t0.Add(2*time.Minute))
	require.Equal(t, t0.Add(2*time.Minute), got["m3"])
	require.Empty(t, c.missingSince)
}
