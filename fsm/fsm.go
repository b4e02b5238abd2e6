package fsm

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// FSM adapts State to hashicorp/raft. Raft's FSM goroutine is the only
// writer; readers (the HTTP API, the leader's loops) go through Read.
//
// It keeps the events of the entries it applied (events.go) in a bounded
// buffer for readers of the event stream (Events): those since it started
// or since its state was last restored from a snapshot, at most
// the buffer's size.
type FSM struct {
	mu      sync.RWMutex
	state   *State
	events  *eventRing
	changed chan struct{}
	// tokens is the state's tokens as of the last apply or restore, read
	// without the lock (Tokens).
	tokens atomic.Pointer[TokenTable]
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns an FSM over an empty state that keeps the newest
// DefaultEventBuffer events.
func New() *FSM { return NewWithEvents(DefaultEventBuffer) }

// NewWithEvents returns an FSM over an empty state that keeps the newest
// buffer events.
func NewWithEvents(buffer int) *FSM {
	st := NewState()
	st.RecordEvents()
	f := &FSM{state: st, events: newEventRing(buffer, 1), changed: make(chan struct{})}
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
			f.events.add(f.state.takeRecords())
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

// Events returns up to limit events after cursor c that the filter passes
// (nil: every one), and where the reader is after them. An
// *EventsGoneError says that the events after c are no longer held.
func (f *FSM) Events(c Cursor, filter *EventFilter, limit int) (EventsRead, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	evs, err := f.events.read(c, filter, limit)
	if err != nil {
		return EventsRead{}, err
	}
	out := EventsRead{Events: evs, Next: AllOf(f.state.Index())}
	switch {
	case limit > 0 && len(evs) >= limit:
		last := evs[len(evs)-1]
		out.Next = Cursor{Index: last.Index, Offset: last.Offset}
	case c.Index > f.state.Index():
		out.Next = c // ahead of this master: it has not applied that far yet
	}
	return out, nil
}

// OldestEvents is the smallest index a reader of the event stream may
// resume from (AllOf), and how many events are held.
func (f *FSM) OldestEvents() (oldest uint64, held int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.events.from - 1, f.events.count
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
	st.RecordEvents()
	f.mu.Lock()
	f.state = st
	// What came before the snapshot is not known here any more.
	f.events = newEventRing(f.events.max, st.Index()+1)
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
