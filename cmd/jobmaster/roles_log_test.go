package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/internal/freeport"
)

// lockedBuffer is a bytes.Buffer that goroutines may write while a test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A master logging JSON writes nothing else to stderr: every line, its
// own and Raft's, is one JSON object, from its start to its stop.
func TestAServerLoggingJSONWritesOnlyJSON(t *testing.T) {
	var stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"server", "--node-id", "m1", "--data-dir", t.TempDir(), "--bootstrap-expect", "1",
			"--http-addr", freeport.Must(t), "--raft-addr", freeport.Must(t), "--gossip-addr", freeport.Must(t), "--log-format", "json"},
			&cliEnv{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" },
				terminal: func(io.Writer) (termSize, bool) { return termSize{}, false }})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "leadership established") {
		require.True(t, time.Now().Before(deadline), "no leadership in 30s: %s", stderr.String())
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop")
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	require.Greater(t, len(lines), 3)
	raft := 0
	for _, l := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), "not JSON: %q", l)
		// One shape for every line, Raft's too: a filter on level sees all.
		require.Contains(t, m, "level", l)
		require.Contains(t, m, "msg", l)
		require.NotContains(t, m, "@level", l)
		if m["module"] == "raft" {
			raft++
		}
	}
	require.Positive(t, raft, "Raft warns as a lone master elects itself: %s", stderr.String())
}
