package master

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/transport"
)

// TestForwardRelaysTheAnswer: a forwarded request reaches the leader with
// its body, hop count and headers, and the leader's answer comes back.
func TestForwardRelaysTheAnswer(t *testing.T) {
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		assert.Equal(t, "2", r.Header.Get(hopsHeader))
		assert.Equal(t, "j1", r.Header.Get(jobIDHeader))
		w.Header().Set("X-Echo", string(body))
		writeError(w, http.StatusConflict, "a different spec is there")
	}))
	defer leader.Close()
	m := &Master{
		cfg:    Config{RequestWait: time.Second},
		log:    slog.New(slog.DiscardHandler),
		client: transport.NewClient(transport.ClientOptions{}),
	}
	defer m.client.CloseIdleConnections()
	addr := transport.HostPort(leader.URL)

	relay := func(uri string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPut, uri, nil)
		r.Header.Set(jobIDHeader, "j1")
		w := httptest.NewRecorder()
		require.Equal(t, answered, m.forward(w, r, []byte(`{"name":"x"}`), addr, 2), "the leader answered")
		return w
	}
	w := relay("/v1/jobs/j1")
	assert.Equal(t, http.StatusConflict, w.Code)
	assert.Equal(t, `{"name":"x"}`, w.Header().Get("X-Echo"))
	assert.Equal(t, "a different spec is there", transport.ErrorMessage(w.Body.Bytes()))

	leader.Close()
	require.Equal(t, notSent, m.forward(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/jobs", nil), nil, addr, 1),
		"no answer, nothing sent (the connection is refused): the caller waits for the next leader")
}

// TestRelayAnswer: an answer up to the buffer, at it, or longer than it is
// relayed unchanged; one cut short within the buffer is not relayed.
func TestRelayAnswer(t *testing.T) {
	for _, body := range []string{"", "short", "12345678", "123456789", strings.Repeat("long answer ", 100)} {
		resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"1"}},
			Body: io.NopCloser(strings.NewReader(body))}
		w := httptest.NewRecorder()
		require.True(t, relayAnswer(w, resp, 8))
		assert.Equal(t, body, w.Body.String())
		assert.Equal(t, "text/plain", w.Header().Get("Content-Type"))
		assert.Empty(t, w.Header().Get("Content-Length"), "hop-by-hop and length headers are the relay's own")
	}
	cut := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(io.MultiReader(strings.NewReader("1234"), iotest.ErrReader(io.ErrUnexpectedEOF)))}
	w := httptest.NewRecorder()
	require.False(t, relayAnswer(w, cut, 8), "cut short: retried")
	assert.False(t, w.Flushed)
	assert.Empty(t, w.Body.String())
	assert.Empty(t, w.Header())
}

// TestElectionWaitFollowsTheClock: the wait for a leader ends by the
// master's clock, not the wall clock. The clock here moves an hour at every
// reading, so a request that would wait an hour of wall time for a leader
// that never comes gets its 503 at once.
func TestElectionWaitFollowsTheClock(t *testing.T) {
	var readings atomic.Int64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.BootstrapExpect = 3 // alone: never a leader
		cfg.RequestWait = time.Hour
		cfg.Now = func() time.Time { return start.Add(time.Duration(readings.Add(1)) * time.Hour) }
	})
	req, err := http.NewRequest(http.MethodGet, c.url(0, "/v1/jobs"), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	require.NoError(t, err, "the wait for a leader ended")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", body)
	assert.Contains(t, transport.ErrorMessage(body), "no leader available")
}

// A request sent to a leader that did not answer is told so, and a write
// that it may have been carried out (a POST /v1/jobs under which id).
func TestNoLeaderMessageSaysWhatMayHaveHappened(t *testing.T) {
	get := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
	post := httptest.NewRequest(http.MethodPost, "/v1/jobs", nil)
	post.Header.Set(jobIDHeader, "wc-1a2b")
	put := httptest.NewRequest(http.MethodPut, "/v1/jobs/x", nil)
	assert.Equal(t, "no leader available (an election may be in progress); retry shortly", noLeaderMessage(post, "", ""))
	assert.Equal(t, "the leader (10.0.0.2:7401) is busy: too many requests wait for it; retry shortly", noLeaderMessage(post, "", "10.0.0.2:7401"))
	assert.Equal(t, "the leader (10.0.0.2:7401) did not answer in time: it may be busy, or gone; retry shortly", noLeaderMessage(get, "10.0.0.2:7401", ""))
	assert.Equal(t, "the leader (10.0.0.2:7401) did not answer in time: it may be busy, or gone; the request may have been carried out; retry shortly",
		noLeaderMessage(put, "10.0.0.2:7401", ""))
	assert.Equal(t, "the leader (10.0.0.2:7401) did not answer in time: it may be busy, or gone; the request may have been carried out, as job wc-1a2b (look for it with GET /v1/jobs/wc-1a2b before submitting again); retry shortly",
		noLeaderMessage(post, "10.0.0.2:7401", ""))
}

// ?stale asks for a read from this master's own state, whatever its value
// but false and 0, which ask for the default, consistent one.
func TestStaleReadsAreAskedForByValue(t *testing.T) {
	for target, want := range map[string]bool{
		"/v1/jobs": false, "/v1/jobs?stale": true, "/v1/jobs?stale=": true, "/v1/jobs?stale=true": true,
		"/v1/jobs?stale=1": true, "/v1/jobs?stale=false": false, "/v1/jobs?stale=FALSE": false, "/v1/jobs?stale=0": false,
	} {
		require.Equal(t, want, staleRead(httptest.NewRequest("GET", target, nil)), target)
	}
}
