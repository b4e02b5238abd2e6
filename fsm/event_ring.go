package fsm

import (
	"errors"
	"fmt"
	"math"
)

// DefaultEventBuffer is how many events a master keeps for readers of its
// event stream: the events of the newest entries, at least the whole
// newest one.
const DefaultEventBuffer = 65536

// Cursor says which events a reader has seen: every event of the entries
// before Index, and those of entry Index up to and including offset
// Offset. AllOf(i) has seen all of entry i.
type Cursor struct {
	Index  uint64
	Offset int
}

// AllOf is the cursor of a reader that has seen every event of entry index
// and of those before it.
func AllOf(index uint64) Cursor { return Cursor{Index: index, Offset: math.MaxInt} }

// Whole reports whether the cursor covers its whole entry.
func (c Cursor) Whole() bool { return c.Offset == math.MaxInt }

// after reports whether event r comes after the cursor.
func (c Cursor) after(r *record) bool {
	return r.index > c.Index || r.index == c.Index && int(r.offset) > c.Offset
}

// ErrEventsGone means the events after a cursor are no longer all held:
// they were dropped from the buffer, or came before a restart or a snapshot
// install of this master. The error is an *EventsGoneError.
var ErrEventsGone = errors.New("events no longer held")

// EventsGoneError says from where a reader can resume: Oldest is the
// smallest index a whole-entry cursor may name (AllOf(Oldest)).
type EventsGoneError struct {
	Oldest uint64
}

func (e *EventsGoneError) Error() string {
	return fmt.Sprintf("%v: the oldest index to resume from is %d", ErrEventsGone, e.Oldest)
}

func (e *EventsGoneError) Unwrap() error { return ErrEventsGone }

// eventRing holds the events of the newest entries, in index order.
type eventRing struct {
	max int
	// from is the first index whose entries' events are all held (an
	// entry may have none).
	from    uint64
	entries [][]record // oldest first; each non-empty, one entry's events
	head    int        // index in entries of the oldest
	count   int        // events held
}

func newEventRing(max int, from uint64) *eventRing {
	if max <= 0 {
		max = DefaultEventBuffer
	}
	return &eventRing{max: max, from: from}
}

// add keeps the events of one entry (in index order), dropping the oldest
// entries to stay within the bound; the newest entry stays whole.
func (r *eventRing) add(evs []record) {
	if len(evs) == 0 {
		return
	}
	r.entries = append(r.entries, evs)
	r.count += len(evs)
	for r.count > r.max && len(r.entries)-r.head > 1 {
		old := r.entries[r.head]
		r.entries[r.head] = nil
		r.head++
		r.count -= len(old)
		r.from = old[0].index + 1
	}
	if r.head > 0 && r.head*2 >= len(r.entries) {
		r.entries = append([][]record(nil), r.entries[r.head:]...)
		r.head = 0
	}
}

// EventFilter says which events a reader wants: those of Topics (nil:
// every topic) and of Job ("": every job and none); the zero filter (or
// nil) passes every event. The buffer checks it on what it keeps, and
// makes only the events it passes.
type EventFilter struct {
	Topics map[Topic]bool
	Job    string
}

// recordFilter is an EventFilter as a read checks it, once per record.
type recordFilter struct {
	f *EventFilter
	// execs: the filter's topics include the execution events, most of
	// what the buffer holds (looked up once per read, not per record).
	execs bool
}

func compileFilter(f *EventFilter) recordFilter {
	return recordFilter{f: f, execs: f == nil || f.Topics == nil || f.Topics[TopicExecution]}
}

// passes reports whether the filter keeps record r.
func (rf recordFilter) passes(r *record) bool {
	f := rf.f
	if f == nil {
		return true
	}
	if f.Job != "" && r.job() != f.Job {
		return false
	}
	if r.other == nil {
		return rf.execs
	}
	return f.Topics == nil || f.Topics[r.other.Topic]
}

// read returns up to limit events after c that the filter passes (nil:
// all), in order.
func (r *eventRing) read(c Cursor, filter *EventFilter, limit int) ([]Event, error) {
	oldest := r.from - 1
	if c.Index < oldest || c.Index == oldest && !c.Whole() && c.Index > 0 {
		return nil, &EventsGoneError{Oldest: oldest}
	}
	live := r.entries[r.head:]
	// The first entry that may hold an event after c.
	lo, hi := 0, len(live)
	for lo < hi {
		mid := (lo + hi) / 2
		if live[mid][0].index < c.Index {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	keep := compileFilter(filter)
	var out []Event
	for _, evs := range live[lo:] {
		for i := range evs {
			if !c.after(&evs[i]) || !keep.passes(&evs[i]) {
				continue
			}
			out = append(out, evs[i].event())
			if len(out) >= limit {
				return out, nil
			}
		}
	}
	return out, nil
}

// EventsRead is what Events returns: the events read, and the cursor of a
// reader that has processed them. Next is AllOf(the applied index) when
// every event up to there was read (or filtered out); the place of the
// last event when the limit cut the read short; the asked-for cursor when
// it is ahead of this state.
type EventsRead struct {
	Events []Event
	Next   Cursor
}
