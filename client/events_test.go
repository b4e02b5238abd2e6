package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/transport"
)

func TestAnExecutorsAnswerMovesOnToTheNextAddress(t *testing.T) {
	executor := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(transport.RoleHeader, transport.RoleExecutor)
		writeJSON(w, http.StatusNotFound, api.Error{Error: "no such endpoint: /v1/jobs (this is executor e1)"})
	})
	master := newServer(t, okJobs)
	c := newTestClient(t, executor.addr()+","+master.addr())
	jobs, err := c.Jobs(context.Background())
	require.NoError(t, err)
	require.Len(t, jobs, 1)

	// Not even a POST is final there: an executor created nothing.
	_, err = c.CreateJob(context.Background(), []byte(`{}`))
	require.Error(t, err) // okJobs answers 200 without an id
	assert.NotContains(t, err.Error(), "executor")

	// Only executors: said at once, not retried until the deadline.
	only := newTestClient(t, executor.addr(), WithTimeout(10*time.Second))
	start := time.Now()
	_, err = only.Jobs(context.Background())
	var u *UnreachableError
	require.ErrorAs(t, err, &u)
	assert.True(t, u.NotMasters())
	assert.Contains(t, err.Error(), executor.addr()+" (an executor, not a master)")
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestStaleReadsAskForStale(t *testing.T) {
	var got []string
	var mu sync.Mutex
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set(api.IndexHeader, "42")
		writeJSON(w, http.StatusOK, api.Job{ID: "j"})
	})
	c := newTestClient(t, s.addr(), WithStaleReads())
	_, index, err := c.JobAt(context.Background(), "j")
	require.NoError(t, err)
	assert.Equal(t, uint64(42), index)
	_, _ = c.Cluster(context.Background())
	require.NoError(t, c.CancelJob(context.Background(), "j"))
	assert.Equal(t, []string{"/v1/jobs/j?stale", "/v1/cluster?stale", "/v1/jobs/j/cancel"}, got, "writes are never stale")
}

// eventMaster serves a fixed list of events as a stream from the asked-for
// cursor; it breaks the stream after breakAfter lines (0: never).
type eventMaster struct {
	events     []api.Event
	breakAfter int
	gone       uint64 // answer 410 for an index below it
	mu         sync.Mutex
	asked      []string
}

func (m *eventMaster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(transport.RoleHeader, transport.RoleMaster)
	q := r.URL.Query()
	m.mu.Lock()
	m.asked = append(m.asked, r.URL.RawQuery)
	m.mu.Unlock()
	index, _ := strconv.ParseUint(q.Get("index"), 10, 64)
	offset := -1
	if q.Has("offset") {
		offset, _ = strconv.Atoi(q.Get("offset"))
	}
	if index < m.gone {
		writeJSON(w, http.StatusGone, api.EventsGone{Error: "gone", OldestIndex: m.gone})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	_ = enc.Encode(api.Event{Index: index, Type: api.EventHeartbeat})
	sent := 0
	for _, e := range m.events {
		if e.Index < index || e.Index == index && (!q.Has("offset") || *e.Offset <= offset) {
			continue
		}
		if m.breakAfter > 0 && sent == m.breakAfter {
			return // the connection ends mid-stream
		}
		_ = enc.Encode(e)
		sent++
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func TestAnEventStreamResumesOnAnotherMasterExactly(t *testing.T) {
	var evs []api.Event
	for i := uint64(5); i < 9; i++ {
		for k := 0; k < 3; k++ {
			off := k
			evs = append(evs, api.Event{Index: i, Offset: &off, Type: "execution-state", Execution: fmt.Sprintf("j/v/%d/%d", i, k)})
		}
	}
	flaky := &eventMaster{events: evs, breakAfter: 4}
	steady := &eventMaster{events: evs}
	a := newServer(t, flaky.ServeHTTP)
	b := newServer(t, steady.ServeHTTP)
	c := newTestClient(t, a.addr()+","+b.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.Events(ctx, EventsQuery{Index: 4, Topics: []string{"execution"}})
	require.NoError(t, err)
	defer s.Close()
	var seen []string
	for len(seen) < len(evs) {
		e, err := s.Next()
		require.NoError(t, err)
		if e.Type == api.EventHeartbeat {
			continue
		}
		seen = append(seen, e.Execution)
	}
	for i, e := range evs {
		assert.Equal(t, e.Execution, seen[i], "event %d", i)
	}
	// The flaky master cut the stream inside entry 6 (after its offset 0):
	// the stream resumed there, on a master that answered.
	steady.mu.Lock()
	defer steady.mu.Unlock()
	flaky.mu.Lock()
	defer flaky.mu.Unlock()
	assert.Contains(t, append(steady.asked, flaky.asked...), "index=6&offset=0&topic=execution")
}

func TestAnEventStreamSaysWhatIsGone(t *testing.T) {
	m := &eventMaster{gone: 10}
	s := newServer(t, m.ServeHTTP)
	c := newTestClient(t, s.addr())
	_, err := c.Events(context.Background(), EventsQuery{Index: 3})
	var gone *EventsGoneError
	require.ErrorAs(t, err, &gone)
	assert.Equal(t, uint64(10), gone.OldestIndex)

	none := newServer(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	c = newTestClient(t, none.addr())
	_, err = c.Events(context.Background(), EventsQuery{Now: true})
	require.ErrorIs(t, err, ErrEventsUnsupported)
}

// The stream carries the client's token, as every other request does; a
// refused token ends the call at once.
func TestAnEventStreamSendsTheToken(t *testing.T) {
	m := &eventMaster{events: []api.Event{{Index: 5, Type: "job-status", Job: "j"}}}
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(transport.TokenHeader) != "secret" {
			transport.Indented.WriteJSON(w, http.StatusUnauthorized, api.Error{Error: "this request needs an ACL token"})
			return
		}
		m.ServeHTTP(w, r)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newTestClient(t, s.addr(), WithToken("secret"))
	st, err := c.Events(ctx, EventsQuery{Index: 4})
	require.NoError(t, err)
	defer st.Close()
	e, err := st.Next()
	for err == nil && e.Type == api.EventHeartbeat {
		e, err = st.Next()
	}
	require.NoError(t, err)
	assert.Equal(t, "j", e.Job)

	retried := func(err *UnreachableError) { t.Errorf("retried after %v", err) }
	c = newTestClient(t, s.addr(), WithToken("wrong"), WithRetryNotify(retried))
	_, err = c.Events(ctx, EventsQuery{Index: 4})
	apiErr, ok := errors.AsType[*APIError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
}
