package master

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Raft logs a failed heartbeat or append to a peer it cannot reach at
// every retry: about six lines a second for as long as a master is down
// (half a million a day). repeatLimit keeps a warning or an error about a
// peer (one that names it, as peer, server-id or target) that repeats to one line
// per window; the first of each window is logged as Raft wrote it. Lines
// about no peer (an election begun, a step down) and less severe ones
// pass: each says something new.
type repeatLimit struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	last map[string]time.Time // a message and its peer: when last logged
}

// raftRepeatWindow is how often a repeated Raft warning or error is
// logged.
const raftRepeatWindow = 30 * time.Second

// maxRepeatKeys bounds what repeatLimit remembers.
const maxRepeatKeys = 1024

func newRepeatLimit(every time.Duration, now func() time.Time) *repeatLimit {
	return &repeatLimit{every: every, now: now, last: map[string]time.Time{}}
}

// exclude is an hclog.LoggerOptions.Exclude: true drops the line.
func (l *repeatLimit) exclude(level hclog.Level, msg string, args ...interface{}) bool {
	if level < hclog.Warn {
		return false
	}
	key, about := msg, false
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "peer" || args[i] == "server-id" || args[i] == "target" {
			key += "\x00" + fmt.Sprint(args[i+1])
			about = true
		}
	}
	if !about {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if at, ok := l.last[key]; ok && now.Sub(at) < l.every {
		return true
	}
	if len(l.last) >= maxRepeatKeys {
		clear(l.last)
	}
	l.last[key] = now
	return false
}
