package integration

import (
	"testing"
	"time"

	"jobmaster/api"
)

// TestDeadMasterCleanup: with --dead-master-cleanup, the leader removes
// masters that are gone from the Raft configuration, and stops at the
// quorum of the configured size (--bootstrap-expect 5: three voters).
func TestDeadMasterCleanup(t *testing.T) {
	const threshold = 2 * time.Second
	c := NewCluster(t, Options{Masters: 5, Executors: 1, Runtime: "sim", DeadMasterCleanup: threshold})
	leader := c.Leader()
	peers := func() int {
		var p api.RaftPeers
		if err := c.getJSON(c.URL(c.Leader().HTTPAddr, "/v1/operator/raft/peers"), &p); err != nil {
			return -1
		}
		return len(p.Peers)
	}
	WaitFor(t, "five voters", 30*time.Second, func() bool { return peers() == 5 })
	var killed []*Node
	for _, m := range c.Masters {
		if m != leader && len(killed) < 3 {
			killed = append(killed, m)
		}
	}
	killed[0].Kill()
	WaitFor(t, killed[0].ID+" removed", 60*time.Second, func() bool { return peers() == 4 })
	killed[1].Kill()
	WaitFor(t, killed[1].ID+" removed", 60*time.Second, func() bool { return peers() == 3 })

	// A third loss would leave two voters, below the quorum of five: the
	// leader keeps it. Watched until gossip has called it dead for twice
	// the threshold.
	killed[2].Kill()
	var deadSince time.Time
	WaitFor(t, killed[2].ID+" dead for twice the threshold, still a voter", 60*time.Second, func() bool {
		if n := peers(); n != 3 {
			t.Fatalf("the configuration has %d voters: the cleanup went below the quorum of 5", n)
		}
		var v api.Cluster
		if err := c.getJSON(c.URL(c.Leader().HTTPAddr, "/v1/cluster"), &v); err != nil {
			return false
		}
		for _, m := range v.Masters {
			if m.ID == killed[2].ID && m.Status == "dead" {
				if deadSince.IsZero() {
					deadSince = time.Now()
				}
				return time.Since(deadSince) > 2*threshold+time.Second
			}
		}
		return false
	})
	c.Leader()
}
