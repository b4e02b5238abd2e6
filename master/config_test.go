package master

import (
	"testing"
	"time"

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
	c := Config{NodeID: "m1", DataDir: t.TempDir(), HTTPAddr: "a:1", RaftAddr: "a:2", GossipAddr: "a:3", JobRetention: -time.Hour}
	require.ErrorContains(t, c.setDefaults(), "0 keeps ended jobs forever")
}
