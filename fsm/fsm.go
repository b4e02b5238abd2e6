package fsm

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// FSM adapts State to hashicorp/raft. Raft's FSM goroutine is the only
// writer; readers (the HTTP API, the leader's loops) go through Read.
type FSM struct {
	mu      sync.RWMutex
	state   *State
	changed chan struct{}
	// tokens is the state's tokens as of the last apply or restore, read
	// without the lock (Tokens).
	tokens atomic.Pointer[TokenTable]
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns an FSM over an empty state.
func New() *FSM {
	f := &FSM{state: NewState(), changed: make(chan struct{})}
	f.tokens.Store(f.state.tokenTable(nil))
	return f
}

// Tokens is the table of ACL tokens as of the last command applied: every
// request to a master looks its token up there, without waiting for an
// apply in progress.
func (f *FSM) Tokens() *TokenTable { return f.tokens.Load() }

// Apply applies one log entry.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in order. The response for a command
// entry is a []Result, one per command in it.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	f.mu.Lock()
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = f.state.ApplyEntry(l.Index, l.Data)
		} else {
			f.state.SetIndex(l.Index)
		}
	}
	f.tokens.Store(f.state.tokenTable(f.tokens.Load()))
	ch := f.changed
	f.changed = make(chan struct{})
	f.mu.Unlock()
	close(ch)
	return out
}

// Changed returns a channel closed the next time the state changes.
func (f *FSM) Changed() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed
}

// Read calls fn with the state under a read lock; fn must not keep
// references into it (the views it returns are copies).
func (f *FSM) Read(fn func(*State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state)
}

// Capture copies the state (for the state hash, or a snapshot).
func (f *FSM) Capture() *Capture {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state.Capture()
}

// Snapshot captures the state; raft persists it in the background.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &snapshot{capture: f.Capture()}, nil
}

// Restore replaces the state with a snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := Restore(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state = st
	f.tokens.Store(st.tokenTable(nil))
	ch := f.changed
	f.changed = make(chan struct{})
	f.mu.Unlock()
	close(ch)
	return nil
}

type snapshot struct{ capture *Capture }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.capture.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
