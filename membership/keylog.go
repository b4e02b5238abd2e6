package membership

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// keyWarnEvery is how often a node repeats its warning that gossip fails
// on the keys: memberlist fails that way on every probe and join.
const keyWarnEvery = time.Minute

// keyMismatch reports whether a memberlist error or log line says that a
// peer's gossip is encrypted with a key this node lacks, or that one side
// encrypts and the other does not. Such a peer never becomes a member, and
// nothing else says why.
func keyMismatch(text string) bool {
	t := strings.ToLower(text)
	return strings.Contains(t, "decrypt") || strings.Contains(t, "encrypt")
}

// gossipLog receives memberlist's log lines: it writes them at debug
// level, except a line on the gossip keys, which it raises to a warning
// (at most once per keyWarnEvery) naming the likely cause.
type gossipLog struct {
	logger *slog.Logger
	now    func() time.Time
	warned keyWarning
}

func (g *gossipLog) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	if keyMismatch(line) {
		g.warned.warn(g.logger, g.now(), line)
	} else {
		g.logger.Debug(line)
	}
	return len(p), nil
}

// keyWarning rate-limits the warning about gossip keys.
type keyWarning struct {
	mu   sync.Mutex
	last time.Time // zero: never warned
}

func (w *keyWarning) warn(logger *slog.Logger, now time.Time, detail string) {
	w.mu.Lock()
	due := w.last.IsZero() || now.Sub(w.last) >= keyWarnEvery
	if due {
		w.last = now
	}
	w.mu.Unlock()
	if due {
		logger.Warn("gossip: a peer's messages cannot be read with this node's gossip keys, or it encrypts and this node does not (or the reverse): give every node the same --gossip-key or --gossip-keyring",
			"detail", detail)
	}
}
