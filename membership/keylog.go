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

// conflictingAddress reports whether a memberlist log line says that two
// nodes gossip under one name from different addresses: two nodes given
// the same --node-id (or a node restarted on a new address before the old
// one's entry could be reclaimed). The newer one never becomes a member.
func conflictingAddress(text string) bool {
	return strings.Contains(strings.ToLower(text), "conflicting address")
}

// gossipLog receives memberlist's log lines: it writes them at debug
// level, except a line on the gossip keys or on two nodes with one name,
// which it raises to a warning (each at most once per keyWarnEvery)
// naming the likely cause.
type gossipLog struct {
	logger   *slog.Logger
	now      func() time.Time
	warned   keyWarning
	conflict rateLimited
}

func (g *gossipLog) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	switch {
	case keyMismatch(line):
		g.warned.warn(g.logger, g.now(), line)
	case conflictingAddress(line):
		if g.conflict.due(g.now()) {
			g.logger.Warn("gossip: two nodes gossip under the same node id from different addresses: give every master and executor its own --node-id (a node restarted on a new address is taken once its old entry is reclaimed)",
				"detail", line)
		}
	default:
		g.logger.Debug(line)
	}
	return len(p), nil
}

// rateLimited says when a repeated warning is due again: at most once per
// keyWarnEvery.
type rateLimited struct {
	mu   sync.Mutex
	last time.Time // zero: never warned
}

func (r *rateLimited) due(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last.IsZero() || now.Sub(r.last) >= keyWarnEvery {
		r.last = now
		return true
	}
	return false
}

// keyWarning rate-limits the warning about gossip keys.
type keyWarning struct{ rateLimited }

func (w *keyWarning) warn(logger *slog.Logger, now time.Time, detail string) {
	if w.due(now) {
		logger.Warn("gossip: a peer's messages cannot be read with this node's gossip keys, or it encrypts and this node does not (or the reverse): give every node the same --gossip-key or --gossip-keyring",
			"detail", detail)
	}
}
