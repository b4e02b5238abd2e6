package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"jobmaster/api"
	"jobmaster/transport"
)

// EventsQuery is what an event stream asks for (GET /v1/events).
type EventsQuery struct {
	// Index and Offset are the cursor of the last line the reader
	// processed: it gets what comes after. HasOffset says Offset is set (a
	// heartbeat's cursor covers its whole entry). Now starts from the
	// present instead, ignoring Index.
	Index     uint64
	Offset    int
	HasOffset bool
	Now       bool
	// Topics keeps only these topics (job, execution, executor, leader);
	// none: all. Job keeps only the events of one job.
	Topics []string
	Job    string
}

// ErrEventsUnsupported is returned by Events when no master serves the
// event stream (an older version): poll instead.
var ErrEventsUnsupported = errors.New("the masters serve no event stream")

// EventsGoneError is returned when the events after the cursor are no
// longer held by any master that answered: read the state again and resume
// from the index it was read at (Index), or from OldestIndex.
type EventsGoneError struct {
	OldestIndex uint64
	Message     string
}

func (e *EventsGoneError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("the events after the asked-for index are no longer held; the oldest index to resume from is %d", e.OldestIndex)
}

// DefaultEventsIdle is how long an event stream may stay silent (the
// masters send a heartbeat every 10 s) before the stream counts it dead and
// resumes on another master.
const DefaultEventsIdle = 30 * time.Second

// EventStream reads the events of one query, in order. When its connection
// breaks or falls silent, it resumes, on the next master that answers,
// after the last line it returned: the reader misses nothing and sees
// nothing twice. It is not safe for concurrent use.
type EventStream struct {
	c    *Client
	ctx  context.Context
	q    EventsQuery
	idle time.Duration

	body   io.ReadCloser
	r      *bufio.Reader
	cancel context.CancelFunc
	timer  *time.Timer
	from   string // the master streaming

	mu     sync.Mutex
	closed bool
}

// Events opens an event stream on the first master that serves it. The
// stream lasts until ctx ends or Close; the client's timeout bounds each
// connection attempt, not the stream.
func (c *Client) Events(ctx context.Context, q EventsQuery) (*EventStream, error) {
	s := &EventStream{c: c, ctx: ctx, q: q, idle: DefaultEventsIdle}
	if err := s.connect(); err != nil {
		return nil, err
	}
	return s, nil
}

// Cursor is where the stream is: the cursor of the last line returned.
func (s *EventStream) Cursor() EventsQuery { return s.q }

// From is the base URL of the master the stream reads from now.
func (s *EventStream) From() string { return s.from }

// Close ends the stream.
func (s *EventStream) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.drop()
}

func (s *EventStream) drop() {
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.body != nil {
		s.body.Close()
	}
	s.body, s.r, s.cancel, s.timer = nil, nil, nil, nil
}

// Next returns the next line: an event, or a heartbeat (api.EventHeartbeat)
// whose index is how far the stream has come. It resumes on another master
// when a connection breaks; it returns an *EventsGoneError when what comes
// next is no longer held, and ctx's error when ctx ends.
func (s *EventStream) Next() (api.Event, error) {
	for {
		if err := s.ctx.Err(); err != nil {
			return api.Event{}, err
		}
		if s.r == nil {
			if err := s.connect(); err != nil {
				return api.Event{}, err
			}
		}
		line, err := s.r.ReadBytes('\n')
		if err != nil {
			s.drop()
			continue // resume from the last line returned
		}
		s.timer.Reset(s.idle)
		var ev api.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			s.drop()
			continue
		}
		switch ev.Type {
		case api.EventGone:
			s.drop()
			gone := &EventsGoneError{Message: ev.Error}
			if ev.OldestIndex != nil {
				gone.OldestIndex = *ev.OldestIndex
			}
			return api.Event{}, gone
		}
		s.q.Now = false
		s.q.Index = ev.Index
		s.q.HasOffset = ev.Offset != nil
		if ev.Offset != nil {
			s.q.Offset = *ev.Offset
		}
		return ev, nil
	}
}

// path is the request of the stream from its cursor.
func (s *EventStream) path() string {
	v := url.Values{}
	if !s.q.Now {
		v.Set("index", strconv.FormatUint(s.q.Index, 10))
		if s.q.HasOffset {
			v.Set("offset", strconv.Itoa(s.q.Offset))
		}
	}
	if len(s.q.Topics) > 0 {
		v.Set("topic", strings.Join(s.q.Topics, ","))
	}
	if s.q.Job != "" {
		v.Set("job", s.q.Job)
	}
	return "/v1/events?" + v.Encode()
}

// connect opens the stream on the first master that serves it, trying
// every master in rounds until the client's timeout.
func (s *EventStream) connect() error {
	ctx := s.ctx
	if s.c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.c.timeout)
		defer cancel()
	}
	n := len(s.c.addrs)
	last := make([]error, n)
	backoff := s.c.backoff
	for {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return context.Canceled
		}
		var gone *EventsGoneError
		unsupported := 0
		start := s.c.first()
		for k := range n {
			i := (start + k) % n
			err := s.open(ctx, s.c.addrs[i])
			if err == nil {
				s.c.answered(i, "") // any master serves a stream
				return nil
			}
			if s.ctx.Err() != nil {
				return s.ctx.Err()
			}
			last[i] = err
			if g, ok := errors.AsType[*EventsGoneError](err); ok {
				gone = g // another master may still hold them
			}
			if errors.Is(err, ErrEventsUnsupported) {
				unsupported++
			}
			if apiErr, ok := errors.AsType[*APIError](err); ok && (apiErr.StatusCode == http.StatusUnauthorized || apiErr.StatusCode == http.StatusForbidden) {
				return err // the token is the cluster's answer, not one master's
			}
		}
		switch {
		case gone != nil:
			return gone
		case unsupported == n:
			return ErrEventsUnsupported
		}
		if s.c.notify != nil {
			s.c.notify(unreachable(s.c.addrs, last))
		}
		select {
		case <-ctx.Done():
			if s.ctx.Err() != nil {
				return s.ctx.Err()
			}
			return unreachable(s.c.addrs, last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// open asks one master for the stream; on success the stream reads from
// it, with the connection cancelled once it stays silent for the idle time.
func (s *EventStream) open(ctx context.Context, base string) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return context.Canceled
	}
	sctx, cancel := context.WithCancel(s.ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, transport.URL(s.c.http, base, s.path()), nil)
	if err != nil {
		cancel()
		return err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	if s.c.token != "" {
		req.Header.Set(transport.TokenHeader, s.c.token)
	}
	// The headers must come within the attempt timeout; the stream itself
	// only has to keep talking.
	wait := s.c.attemptTimeout
	if wait <= 0 {
		wait = DefaultAttemptTimeout
	}
	stop := context.AfterFunc(ctx, cancel)
	timer := time.AfterFunc(wait, cancel)
	resp, err := s.c.http.Do(req)
	timer.Stop()
	stop()
	if err != nil {
		cancel()
		return shortError{err}
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if role := resp.Header.Get(transport.RoleHeader); role != "" && role != transport.RoleMaster {
			return fmt.Errorf("%s is an %s, not a master", displayAddr(base), role)
		}
		switch resp.StatusCode {
		case http.StatusGone:
			var g api.EventsGone
			_ = json.Unmarshal(body, &g)
			return &EventsGoneError{OldestIndex: g.OldestIndex, Message: g.Error}
		case http.StatusNotFound:
			return fmt.Errorf("%s: %w", displayAddr(base), ErrEventsUnsupported)
		}
		return &APIError{StatusCode: resp.StatusCode, Message: transport.ErrorMessage(body), Method: http.MethodGet, Path: s.path()}
	}
	s.body, s.r, s.cancel, s.from = resp.Body, bufio.NewReader(resp.Body), cancel, base
	s.timer = time.AfterFunc(s.idle, cancel)
	return nil
}
