package master

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/strictjson"
)

// eventsPath is the event stream's route (docs/api.md, "GET /v1/events").
const eventsPath = "/v1/events"

// eventsBatch bounds the events read from the buffer at once.
const eventsBatch = 512

// eventsQuery is what a GET /v1/events asks for.
type eventsQuery struct {
	from fsm.Cursor
	now  bool // no index: from the present
	// filter is the topics and job asked for; the buffer checks it.
	filter fsm.EventFilter
	sse    bool
}

// parseEventsQuery reads the query and headers of a stream request.
func parseEventsQuery(r *http.Request) (eventsQuery, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	out := eventsQuery{sse: strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	if err != nil {
		return out, fmt.Errorf("malformed query: %v", err)
	}
	for k := range q {
		switch k {
		case "index", "offset", "topic", "job":
		default:
			return out, fmt.Errorf("unknown parameter %.100q: the event stream takes index, offset, topic and job", k)
		}
	}
	index, offset := q.Get("index"), q.Get("offset")
	// An EventSource resumes by itself with the id of the last line it
	// got: that wins over the URL it was opened with.
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		index, offset, _ = strings.Cut(id, ".")
	}
	if len(q["index"]) > 1 || len(q["offset"]) > 1 {
		return out, errors.New("index and offset may be given once each")
	}
	switch {
	case index == "" && offset != "":
		return out, errors.New("offset needs an index: it is the last offset seen within that index")
	case index == "":
		out.now = true
	default:
		i, err := strconv.ParseUint(index, 10, 64)
		if err != nil {
			return out, fmt.Errorf("index %q: want the log index of the last event seen (0 or more)", index)
		}
		out.from = fsm.AllOf(i)
		if offset != "" {
			k, err := strconv.Atoi(offset)
			if err != nil || k < 0 || k == math.MaxInt {
				return out, fmt.Errorf("offset %q: want the offset of the last event seen within index %d (0 or more)", offset, i)
			}
			out.from.Offset = k
		}
	}
	for _, v := range q["topic"] {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				continue
			}
			if !slices.Contains(fsm.Topics, fsm.Topic(t)) {
				return out, fmt.Errorf("topic %q: want job, execution, executor or leader", strictjson.Short(t))
			}
			if out.filter.Topics == nil {
				out.filter.Topics = make(map[fsm.Topic]bool)
			}
			out.filter.Topics[fsm.Topic(t)] = true
		}
	}
	if len(q["job"]) > 1 {
		return out, errors.New("job may be given once")
	}
	if job := q.Get("job"); job != "" {
		if err := jobspec.CheckID(job); err != nil {
			return out, fmt.Errorf("job: %w", err)
		}
		out.filter.Job = job
	}
	return out, nil
}

// events: GET /v1/events. This master's own events, never forwarded: every
// master derives the same events from the same entries, so a reader may
// resume on any of them. The stream ends when the client goes, when the
// master stops, or with a "gone" line when this master no longer holds
// what comes next (the reader fell behind what it keeps, or a snapshot
// was installed under it).
func (m *Master) events(w http.ResponseWriter, r *http.Request) {
	q, err := parseEventsQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	cur := q.from
	if q.now {
		m.fsm.Read(func(st *fsm.State) { cur = fsm.AllOf(m.fsm.IndexOf(st)) })
	}
	// Check before answering 200 that the events after cur are held.
	changed := m.fsm.Changed()
	read, err := m.fsm.Events(cur, &q.filter, eventsBatch)
	if gone, ok := errors.AsType[*fsm.EventsGoneError](err); ok {
		jsonFormat.WriteJSON(w, http.StatusGone, api.EventsGone{OldestIndex: gone.Oldest,
			Error: fmt.Sprintf("master %s no longer holds the events after index %d (it holds those after index %d): read the state again and resume from its %s", m.cfg.NodeID, cur.Index, gone.Oldest, api.IndexHeader)})
		return
	}
	s := &eventStream{w: w, rc: http.NewResponseController(w), sse: q.sse}
	h := w.Header()
	if q.sse {
		h.Set("Content-Type", "text/event-stream")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies must not hold lines back
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		// A stream's body is discarded, and no write would ever fail to
		// end it: headers only.
		return
	}
	if s.sse {
		s.raw("retry: 1000\n\n")
	}
	// The first line says where the stream starts.
	if !s.heartbeat(cur) {
		return
	}
	tick := time.NewTicker(m.cfg.EventHeartbeat)
	defer tick.Stop()
	for {
		if len(read.Events) > 0 {
			for i := range read.Events {
				if !s.event(&read.Events[i]) {
					return
				}
			}
			if !s.flush() {
				return
			}
			tick.Reset(m.cfg.EventHeartbeat)
		}
		cur = read.Next
		if len(read.Events) < eventsBatch {
			select {
			case <-changed:
			case <-tick.C:
				if !s.heartbeat(cur) {
					return
				}
			case <-r.Context().Done():
				return
			case <-m.stop:
				return
			}
		}
		if !m.stillAllowed(r) {
			// Its token was deleted: the stream ends, and the reader's
			// next request is refused (401).
			return
		}
		changed = m.fsm.Changed()
		read, err = m.fsm.Events(cur, &q.filter, eventsBatch)
		if gone, ok := errors.AsType[*fsm.EventsGoneError](err); ok {
			o := gone.Oldest
			ev := &api.Event{Index: cur.Index, Type: api.EventGone, OldestIndex: &o}
			at := fmt.Sprintf("index %d", cur.Index)
			if !cur.Whole() {
				off := cur.Offset
				ev.Offset = &off
				at += fmt.Sprintf(", offset %d", off)
			}
			kept := m.cfg.EventBuffer
			if kept <= 0 {
				kept = fsm.DefaultEventBuffer
			}
			ev.Error = fmt.Sprintf("master %s no longer holds the events after %s: this stream fell behind the newest %d events it keeps, or a snapshot was installed (the oldest it holds now are those after index %d): read the state again and resume from its %s",
				m.cfg.NodeID, at, kept, gone.Oldest, api.IndexHeader)
			s.line(api.EventGone, "", ev)
			s.flush()
			return
		}
	}
}

// eventStream writes the lines of one stream: newline-delimited JSON, or
// server-sent events for an EventSource.
type eventStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	sse bool
	err error
}

func (s *eventStream) raw(text string) {
	if s.err == nil {
		_, s.err = s.w.Write([]byte(text))
	}
}

func (s *eventStream) flush() bool {
	if s.err == nil {
		s.err = s.rc.Flush()
	}
	return s.err == nil
}

// line writes one line: under SSE, with the event name (none for changes,
// which an EventSource's onmessage receives) and the id it resumes from.
func (s *eventStream) line(name, id string, ev *api.Event) bool {
	b, err := json.Marshal(ev)
	if err != nil {
		s.err = err
		return false
	}
	if s.sse {
		if name != "" {
			s.raw("event: " + name + "\n")
		}
		if id != "" {
			s.raw("id: " + id + "\n")
		}
		s.raw("data: " + string(b) + "\n\n")
	} else {
		s.raw(string(b) + "\n")
	}
	return s.err == nil
}

func (s *eventStream) heartbeat(c fsm.Cursor) bool {
	ev := &api.Event{Index: c.Index, Type: api.EventHeartbeat}
	id := strconv.FormatUint(c.Index, 10)
	if !c.Whole() {
		off := c.Offset
		ev.Offset = &off
		id += "." + strconv.Itoa(off)
	}
	return s.line(api.EventHeartbeat, id, ev) && s.flush()
}

func (s *eventStream) event(e *fsm.Event) bool {
	ev := eventToAPI(e)
	return s.line("", fmt.Sprintf("%d.%d", e.Index, e.Offset), &ev)
}

// eventToAPI is an event as the stream shows it.
func eventToAPI(e *fsm.Event) api.Event {
	off := e.Offset
	out := api.Event{Index: e.Index, Offset: &off, Topic: string(e.Topic), Type: e.Type, Time: e.Time, Job: e.Job,
		Execution: e.Execution, Vertex: e.Vertex, Executor: e.Executor, State: e.State, Previous: e.Previous,
		Message: e.Message, Reason: e.Reason, Node: e.Node, FencingToken: e.Token}
	switch e.Type {
	case fsm.EventExecutionState:
		sub, att := e.Subtask, e.Attempt
		out.Subtask, out.Attempt = &sub, &att
	case fsm.EventJobStatus, fsm.EventJobRestart:
		n := e.Restarts
		out.Restarts = &n
	}
	return out
}
