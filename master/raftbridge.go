package master

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// raftLogBridge takes hashicorp/raft's log, written by hclog as JSON lines
// (@level, @message, @module, @timestamp, and the line's keys), and logs
// each line through the node's own logger: with --log-format json, Raft's
// lines are objects of the same shape as every other line (time, level,
// msg, module, node and the rest), so that a filter on level sees them.
type raftLogBridge struct {
	logger *slog.Logger

	mu   sync.Mutex
	part []byte // an unfinished line
}

func (b *raftLogBridge) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.part = append(b.part, p...)
	for {
		i := bytes.IndexByte(b.part, '\n')
		if i < 0 {
			break
		}
		b.line(b.part[:i])
		b.part = b.part[i+1:]
	}
	if len(b.part) == 0 {
		b.part = nil // not kept growing from its start
	}
	return len(p), nil
}

// line logs one of hclog's JSON lines; one that is not JSON is logged as
// its text, at warn.
func (b *raftLogBridge) line(l []byte) {
	l = bytes.TrimSpace(l)
	if len(l) == 0 {
		return
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(l))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		b.logger.Warn(string(l), "module", "raft")
		return
	}
	level := slog.LevelInfo
	switch lv, _ := m["@level"].(string); hclog.LevelFromString(lv) {
	case hclog.Trace:
		level = slog.LevelDebug - 4
	case hclog.Debug:
		level = slog.LevelDebug
	case hclog.Warn:
		level = slog.LevelWarn
	case hclog.Error:
		level = slog.LevelError
	}
	if !b.logger.Enabled(context.Background(), level) {
		return
	}
	at := time.Now()
	if ts, ok := m["@timestamp"].(string); ok {
		if t, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", ts); err == nil {
			at = t
		}
	}
	msg, _ := m["@message"].(string)
	r := slog.NewRecord(at, level, msg, 0)
	if mod, ok := m["@module"].(string); ok {
		r.AddAttrs(slog.String("module", mod))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if len(k) > 0 && k[0] != '@' {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		r.AddAttrs(slog.Any(k, m[k]))
	}
	_ = b.logger.Handler().Handle(context.Background(), r)
}
