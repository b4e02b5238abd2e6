package integration

import (
	"fmt"
	"testing"
	"time"

	"jobmaster/api"
)

// TestBootstrapExpectNeverSplits: five masters started at once with
// --bootstrap-expect 3, again and again, always form one cluster of the
// five: every master ends in one Raft configuration with one cluster id.
func TestBootstrapExpectNeverSplits(t *testing.T) {
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for round := 1; round <= rounds; round++ {
		t.Run(fmt.Sprintf("round-%d", round), func(t *testing.T) {
			c := NewCluster(t, Options{Masters: 5, BootstrapExpect: 3, Executors: 1, Runtime: "sim"})
			WaitFor(t, "every master in one cluster of five", 60*time.Second, func() bool {
				cluster := ""
				for _, m := range c.Masters {
					var v api.Cluster
					if err := c.getJSON(c.URL(m.HTTPAddr, "/v1/cluster?stale"), &v); err != nil {
						return false
					}
					if v.ClusterID == "" || len(v.Masters) != 5 || cluster != "" && v.ClusterID != cluster {
						if cluster != "" && v.ClusterID != "" && v.ClusterID != cluster {
							t.Logf("%s is in cluster %s, another master in %s", m.ID, v.ClusterID, cluster)
						}
						return false
					}
					cluster = v.ClusterID
				}
				return true
			})
			for _, m := range c.Masters {
				var peers api.RaftPeers
				if err := c.getJSON(c.URL(m.HTTPAddr, "/v1/operator/raft/peers?stale"), &peers); err != nil {
					t.Fatalf("%s: raft peers: %v", m.ID, err)
				}
				if len(peers.Peers) != 5 {
					t.Fatalf("%s's configuration has %d masters: %+v", m.ID, len(peers.Peers), peers.Peers)
				}
			}
		})
	}
}
