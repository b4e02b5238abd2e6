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
	// floor is, after a restore that took the state back to an older
	// index (an operator's restore of a backup), the index this master had
	// applied before it, plus one: readers are told the state stands
	// there (IndexOf), and every event cursor up to it is gone. It is this
	// master's own, not replicated.
	floor atomic.Uint64
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
// entry is a []Result, one per command in it. The state is locked for one
// entry at a time: Raft hands a master that catches up many committed
// entries at once, each of which may place or submit 100,000 subtasks, and
// readers wait for no more than one.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		f.mu.Lock()
		if l.Type == raft.LogCommand {
			out[i] = f.state.ApplyEntry(l.Index, l.Data)
			f.events.add(f.state.takeRecords())
		} else {
			f.state.SetIndex(l.Index)
		}
		f.tokens.Store(f.state.tokenTable(f.tokens.Load()))
		ch := f.changed
		f.changed = make(chan struct{})
		f.mu.Unlock()
		close(ch)
	}
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
	at := f.IndexOf(f.state)
	out := EventsRead{Events: evs, Next: AllOf(at)}
	switch {
	case limit > 0 && len(evs) >= limit:
		last := evs[len(evs)-1]
		out.Next = Cursor{Index: last.Index, Offset: last.Offset}
	case c.Index > at:
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
	// What came before the snapshot is not known here any more. A snapshot
	// older than what this master had applied (a backup restored) goes
	// back in time: the readers that had seen up to prev must read the
	// state again, and resume after prev+1, where the restored state
	// stands for them (the entries after the restore come after it).
	from := st.Index() + 1
	if prev := f.IndexOf(f.state); prev > st.Index() {
		from = prev + 2
		f.floor.Store(prev + 1)
	}
	f.state = st
	f.events = newEventRing(f.events.max, from)
	f.tokens.Store(st.tokenTable(nil))
	ch := f.changed
	f.changed = make(chan struct{})
	f.mu.Unlock()
	close(ch)
	return nil
}

// IndexOf is the index readers of st (this FSM's state, inside Read) are
// told it stands at: its applied index, or, after a restore that took it
// back, the index this master had passed before (floor), until entries pass
// that. An event stream resumed from it continues the read exactly.
func (f *FSM) IndexOf(st *State) uint64 { return max(st.Index(), f.floor.Load()) }

type snapshot struct{ capture *Capture }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.capture.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
