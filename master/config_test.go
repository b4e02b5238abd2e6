package master

import (
	"context"
	"errors"
	"fmt"
	"jobmaster/fsm"
	"jobmaster/placement"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

func TestConfigChecksTheTimingRelation(t *testing.T) {
	base := func() Config {
		return Config{NodeID: "m1", DataDir: t.TempDir(), HTTPAddr: "a:1", RaftAddr: "a:2", GossipAddr: "a:3"}
	}
	c := base()
	require.NoError(t, c.setDefaults(), "the defaults satisfy it: 15s >= 10s + 2s + 2 x 1s")
	require.Equal(t, 14*time.Second, c.minExecutorTimeout(c.ExecutorLease))

	c = base()
	c.ExecutorTimeout = 13 * time.Second
	require.ErrorContains(t, c.setDefaults(), "--executor-timeout (13s) must be at least 14s")

	c = base()
	c.ExecutorHeartbeat, c.ExecutorLease, c.ExecutorTimeout = 200*time.Millisecond, 3*time.Second, 3800*time.Millisecond
	require.NoError(t, c.setDefaults(), "3s + 400ms + 2 x 200ms")
	c = base()
	c.ExecutorHeartbeat, c.ExecutorLease, c.ExecutorTimeout = 200*time.Millisecond, 3*time.Second, 3700*time.Millisecond
	require.Error(t, c.setDefaults())
}

// A negative duration would reach a ticker and panic once the master leads:
// it is refused at start, naming the flag.
func TestConfigRefusesNegativeDurations(t *testing.T) {
	for name, set := range map[string]func(*Config){
		"--executor-heartbeat":     func(c *Config) { c.ExecutorHeartbeat = -time.Second },
		"--job-retention":          func(c *Config) { c.JobRetention = -time.Nanosecond },
		"--deploy-timeout":         func(c *Config) { c.DeployTimeout = -time.Second },
		"--raft-heartbeat-timeout": func(c *Config) { c.RaftHeartbeatTimeout = -time.Millisecond },
	} {
		c := Config{NodeID: "m1", DataDir: t.TempDir(), HTTPAddr: "a:1", RaftAddr: "a:2", GossipAddr: "a:3"}
		set(&c)
		require.ErrorContains(t, c.setDefaults(), name+" must not be negative", name)
	}
	for name, set := range map[string]func(*Config){
		"--max-jobs":           func(c *Config) { c.MaxJobs = -1 },
		"--max-executions":     func(c *Config) { c.MaxExecutions = -1 },
		"--max-spec-bytes":     func(c *Config) { c.MaxSpecBytes = -1 },
		"--max-snapshot-bytes": func(c *Config) { c.MaxSnapshotBytes = -1 },
	} {
		c := Config{NodeID: "m1", DataDir: t.TempDir(), HTTPAddr: "a:1", RaftAddr: "a:2", GossipAddr: "a:3"}
		set(&c)
		require.ErrorContains(t, c.setDefaults(), name+" must not be negative", name)
	}
	c := Config{NodeID: "m1", DataDir: t.TempDir(), HTTPAddr: "a:1", RaftAddr: "a:2", GossipAddr: "a:3", JobRetention: -time.Hour}
	require.ErrorContains(t, c.setDefaults(), "0 keeps ended jobs forever")
	// A heartbeat too short to tick (under 4ns it panicked once the master
	// led) or to send is refused.
	c = Config{NodeID: "m1", DataDir: t.TempDir(), HTTPAddr: "a:1", RaftAddr: "a:2", GossipAddr: "a:3", ExecutorHeartbeat: 3 * time.Nanosecond}
	require.ErrorContains(t, c.setDefaults(), "--executor-heartbeat (3ns) must be at least 10ms")
	// Raft's own check names its fields, not the flags, and comes after
	// the data directory is made.
	c = Config{NodeID: "m1", DataDir: t.TempDir(), HTTPAddr: "a:1", RaftAddr: "a:2", GossipAddr: "a:3", RaftElectionTimeout: 100 * time.Millisecond}
	require.ErrorContains(t, c.setDefaults(), "--raft-election-timeout (100ms) must be at least --raft-heartbeat-timeout (250ms)")
}

// TestRetryable: the errors after which a write is handed to the next
// leader (or the session after a restore) are those that mean it was not
// applied by this one.
func TestRetryable(t *testing.T) {
	for _, err := range []error{raft.ErrNotLeader, raft.ErrLeadershipLost, fsm.ErrStaleToken, context.Canceled,
		raft.ErrRaftShutdown, errShutdown, raft.ErrAbortedByRestore, fmt.Errorf("propose: %w", raft.ErrAbortedByRestore)} {
		if !retryable(err) {
			t.Errorf("%v: not retryable", err)
		}
	}
	for _, err := range []error{errors.New("disk full"), fsm.ErrConflict, fsm.ErrNotFound} {
		if retryable(err) {
			t.Errorf("%v: retryable", err)
		}
	}
}

// --placement reaches the leader's core (the policy it plans by).
func TestConfigPlacementReachesTheLeader(t *testing.T) {
	for _, p := range []placement.Policy{placement.Spread, placement.Pack} {
		c := Config{Placement: p}
		require.Equal(t, p, c.leaderConfig().Placement)
	}
}
