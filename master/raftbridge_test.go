package master

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
)

// Raft's lines, written by hclog as JSON, come out of the node's logger in
// its shape: time, level, msg, then module and the line's keys; below the
// logger's level, nothing.
func TestRaftLogBridgeWritesTheNodesShape(t *testing.T) {
	var out bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Debug, JSONFormat: true, Output: &raftLogBridge{logger: logger}}).With("node", "m1")
	h.Warn("failed to contact quorum of nodes, stepping down", "peers", 2)
	h.Debug("below the node's level")
	var got []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), "%s", l)
		got = append(got, m)
	}
	require.Len(t, got, 1, out.String())
	require.Equal(t, "WARN", got[0]["level"])
	require.Equal(t, "failed to contact quorum of nodes, stepping down", got[0]["msg"])
	require.Equal(t, "raft", got[0]["module"])
	require.Equal(t, "m1", got[0]["node"])
	require.EqualValues(t, 2, got[0]["peers"])
	require.Contains(t, got[0], "time")
	for k := range got[0] {
		require.NotEqual(t, byte('@'), k[0], "hclog's own key %q", k)
	}
}
