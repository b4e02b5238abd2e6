package master

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/pki"
	"jobmaster/transport"
)

// successions is how often the running masters found their leader's
// process gone and decided d.
func (c *testCluster) successions(d string) float64 {
	var n float64
	for _, m := range c.masters {
		if m != nil {
			n += testutil.ToFloat64(m.metrics.successions.WithLabelValues(d))
		}
	}
	return n
}

// A stopped leader's Raft port refuses connections: the survivors find its
// process gone and one stands at once, instead of both waiting out Raft's
// heartbeat timeout.
func TestASurvivorStandsWhenTheLeadersPortRefuses(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	// The survivors' logs are alike when the leader stops: the epoch the
	// leader just committed has reached both (else the one that lacks it
	// may receive it from the stopping leader after the other asked for
	// its position, and both stand, which Raft's vote settles but this test
	// does not look at).
	waitFor(t, "every master's log to end at the same entry", func() bool {
		last := c.masters[l].raft.LastIndex()
		for _, m := range c.masters {
			if m.raft.LastIndex() != last {
				return false
			}
		}
		return true
	})
	old := c.masters[l].ID()
	tokenBefore := c.masters[l].Token()
	c.stop(l)
	nl := c.leader()
	assert.NotEqual(t, old, c.masters[nl].ID())
	assert.Greater(t, c.masters[nl].Token(), tokenBefore)
	found := c.successions("stood") + c.successions("deferred") + c.successions("no_quorum")
	require.GreaterOrEqual(t, found, 1.0, "no survivor found the stopped leader's process gone")
	assert.LessOrEqual(t, c.successions("stood"), 1.0, "survivors with the same log agree on one nominee")
}

// A live leader answers its probes: nobody stands while it leads.
func TestNoSuccessionWhileTheLeaderLives(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	f := c.follower()
	for _, m := range c.masters {
		require.False(t, processGone(m.rp.advertise), "%s is running, yet its port refused", m.ID())
	}
	// Another master's word alone moves nothing: the leader answers the
	// probe it triggers.
	r := do(t, http.MethodGet, c.url(f, raftPositionPath+"?gone="+c.masters[l].ID()), nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var p positionAnswer
	require.NoError(t, json.Unmarshal(r.body, &p))
	assert.Equal(t, c.masters[f].ID(), p.ID)
	assert.Positive(t, p.Index)
	assert.Positive(t, p.Term)
	assert.Equal(t, l, c.leader())
	assert.Zero(t, c.successions("stood")+c.successions("deferred")+c.successions("no_quorum"))
}

// With TLS, only a master's certificate may ask for a position.
func TestRaftPositionNeedsAServersCertificate(t *testing.T) {
	c := newTLSCluster(t, 3)
	f := c.follower()
	for _, tt := range []struct {
		name string
		role pki.Role
		id   string
		want int
	}{
		{"no certificate", "", "", http.StatusForbidden},
		{"a client's", pki.Client, "alice", http.StatusForbidden},
		{"an executor's", pki.Executor, "e1", http.StatusForbidden},
		{"a master's", pki.Server, "m9", http.StatusOK},
	} {
		hc := c.client(tt.role, tt.id)
		r := doWith(t, hc, http.MethodGet, transport.URL(hc, c.masters[f].HTTPAddr(), raftPositionPath), nil)
		assert.Equal(t, tt.want, r.status, "%s: %s", tt.name, r.body)
	}
}
