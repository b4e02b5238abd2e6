package master

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
)

// Raft's repeated warnings about a peer it cannot reach are logged once a
// window, per message and peer; other lines pass.
func TestRepeatedRaftErrorsAreLoggedOnceAWindow(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Name: "raft", Output: &out, Level: hclog.Info,
		Exclude: newRepeatLimit(30*time.Second, func() time.Time { return now }).exclude})
	refused := errors.New("dial tcp 127.0.0.1:7412: connect: connection refused")
	for range 60 { // ten seconds of retries to two peers
		logger.Error("failed to heartbeat to", "peer", "127.0.0.1:7412", "backoff time", "125ms", "error", refused)
		logger.Error("failed to heartbeat to", "peer", "127.0.0.1:7413", "backoff time", "125ms", "error", refused)
		logger.Info("entering follower state")
		logger.Warn("heartbeat timeout reached, starting election", "last-leader-id", "m3")
		logger.Warn("failed to contact", "server-id", "m2", "time", "1s")
		logger.Warn("failed to contact", "server-id", "m3", "time", "1s")
		logger.Error("failed to make requestVote RPC", "target", "{Voter m2 127.0.0.1:7412}", "error", refused)
		logger.Error("failed to make requestVote RPC", "target", "{Voter m3 127.0.0.1:7413}", "error", refused)
		now = now.Add(time.Second / 6)
	}
	lines := strings.Count(out.String(), "failed to heartbeat to")
	require.Equal(t, 2, lines, "%s", out.String())
	require.Equal(t, 60, strings.Count(out.String(), "entering follower state"))
	require.Equal(t, 60, strings.Count(out.String(), "starting election"), "a line about no peer passes")
	require.Equal(t, 2, strings.Count(out.String(), "failed to contact"), "once for each server-id")
	require.Equal(t, 2, strings.Count(out.String(), "requestVote RPC"), "once for each target")
	now = now.Add(30 * time.Second)
	logger.Error("failed to heartbeat to", "peer", "127.0.0.1:7412", "backoff time", "125ms", "error", refused)
	require.Equal(t, 3, strings.Count(out.String(), "failed to heartbeat to"), "once the window has passed")
}
