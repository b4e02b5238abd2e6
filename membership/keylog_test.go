package membership

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// logBuffer is a slog destination that tests can read while nodes write.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func TestKeyWarningIsRateLimited(t *testing.T) {
	var b logBuffer
	now := time.Unix(1000, 0)
	g := &gossipLog{logger: b.logger(), now: func() time.Time { return now }}
	for range 3 {
		_, _ = g.Write([]byte("[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=1.2.3.4:5\n"))
	}
	_, _ = g.Write([]byte("[DEBUG] memberlist: Stream connection from=1.2.3.4:5\n"))
	assert.Equal(t, 1, strings.Count(b.String(), "level=WARN"), b.String())
	now = now.Add(keyWarnEvery)
	_, _ = g.Write([]byte("[ERR] memberlist: Decrypt packet failed\n"))
	assert.Equal(t, 2, strings.Count(b.String(), "level=WARN"), "warned again a minute later: %s", b.String())
	assert.Contains(t, b.String(), "--gossip-key")
}

// A node whose key differs from its peers' says so, on both sides,
// instead of failing silently to join.
func TestWrongKeyIsLogged(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	var s started
	defer s.shutdown()
	var seed, joiner logBuffer
	start := func(id, addr string, join []string, log *logBuffer, key []byte) {
		n, err := Start(Config{NodeID: id, BindAddr: addr, Join: join, Keys: [][]byte{key}, ReconnectInterval: 100 * time.Millisecond,
			Meta: Meta{Role: RoleExecutor, HTTPAddr: id + ".example:7431", Version: 1}, Logger: log.logger()})
		require.NoError(t, err)
		s = append(s, n)
	}
	a := freePort(t)
	start("m1", a, nil, &seed, newKey(t))
	start("wrong", freePort(t), []string{a}, &joiner, newKey(t))
	waitFor(t, "both sides to warn about the keys", func() bool {
		return strings.Contains(seed.String(), "gossip keys") && strings.Contains(joiner.String(), "gossip keys")
	})
}

// Two nodes under one name (the same --node-id twice) are a warning naming
// the flag, not a debug line only.
func TestAConflictingAddressIsAWarning(t *testing.T) {
	var b logBuffer
	now := time.Unix(1000, 0)
	g := &gossipLog{logger: b.logger(), now: func() time.Time { return now }}
	for range 3 {
		_, _ = g.Write([]byte("[ERR] memberlist: Conflicting address for e1. Mine: 127.0.0.1:7628 Theirs: 127.0.0.1:7605 Old state: 0\n"))
	}
	assert.Equal(t, 1, strings.Count(b.String(), "level=WARN"), b.String())
	assert.Contains(t, b.String(), "--node-id")
}

// A node none of whose join addresses answers says so once it has been
// alone for a while (at start the others may not be up yet).
func TestAJoinThatNeverSucceedsIsAWarning(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	var log logBuffer
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	n, err := Start(Config{NodeID: "e1", BindAddr: freePort(t), Join: []string{freePort(t)}, ReconnectInterval: 20 * time.Millisecond,
		Meta: Meta{Role: RoleExecutor, HTTPAddr: "e1.example:7431", Version: 1}, Logger: log.logger(), Now: clock})
	require.NoError(t, err)
	defer n.Shutdown()
	mu.Lock()
	now = now.Add(joinWarnAfter)
	mu.Unlock()
	waitFor(t, "the join warning", func() bool { return strings.Contains(log.String(), "none of the join addresses answers") })
}
