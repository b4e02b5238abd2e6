package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/wire"
)

// routeRecorder is a fake masters' log route: it answers with answer and
// keeps the query of every request it had, with its token.
type routeRecorder struct {
	mu      sync.Mutex
	queries []url.Values
	tokens  []string
	answer  http.HandlerFunc
}

func (r *routeRecorder) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.queries = append(r.queries, req.URL.Query())
	r.tokens = append(r.tokens, req.Header.Get(api.TokenHeader))
	r.mu.Unlock()
	r.answer(w, req)
}

func (r *routeRecorder) asked() []url.Values {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]url.Values(nil), r.queries...)
}

// relayedLog answers as a master relaying the log of executor e1.
func relayedLog(text string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.LogExecutorHeader, "e1")
		if r.URL.Query().Get("follow") == "1" {
			w.Header().Set("Trailer", wire.HeaderEnd)
			_, _ = io.WriteString(w, text)
			w.Header().Set(wire.HeaderEnd, wire.EndComplete)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(text)))
		_, _ = io.WriteString(w, text)
	}
}

func readAll(t *testing.T, l *Log) string {
	t.Helper()
	defer l.Close()
	b, err := io.ReadAll(l)
	require.NoError(t, err)
	return string(b)
}

// An executor that cannot be reached, refuses this client or fails gives
// way to the masters' route, at once and followed; one that says it has no
// such log does not.
func TestLogsGoThroughTheMastersWhenTheExecutorFails(t *testing.T) {
	answering := func(status int, msg string) string {
		return newServer(t, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, status, api.Error{Error: msg})
		}).addr()
	}
	for _, tt := range []struct {
		name, addr, why string
	}{
		{"connection refused", deadAddr(t), "connection refused"},
		{"no client certificate", answering(http.StatusForbidden, "this executor answers only peers with a certificate from the cluster's CA"), "(HTTP 403)"},
		{"unauthorized", answering(http.StatusUnauthorized, "who are you"), "(HTTP 401)"},
		{"failing", answering(http.StatusInternalServerError, "disk on fire"), "(HTTP 500)"},
		{"behind a proxy that cannot reach it", answering(http.StatusBadGateway, "bad gateway"), "(HTTP 502)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			route := &routeRecorder{answer: relayedLog("relayed line\n")}
			master := logsCluster(t, []api.Executor{{ID: "e1", HTTPAddr: tt.addr, Status: "alive"}}, route.serve)
			c := newTestClient(t, master.addr(), WithToken("submit-secret"))
			for _, follow := range []bool{false, true} {
				l, err := c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stderr, Follow: follow})
				require.NoError(t, err)
				assert.Equal(t, "relayed line\n", readAll(t, l))
				assert.Equal(t, "http://"+master.addr(), l.Master)
				assert.Equal(t, "e1", l.Executor)
				assert.Equal(t, "wc/split/0/2", l.ExecutionID)
				require.Error(t, l.ExecutorErr)
				assert.Contains(t, l.ExecutorErr.Error(), tt.why)
				assert.False(t, l.MayLackStart)
			}
			asked := route.asked()
			require.Len(t, asked, 2)
			want := url.Values{"execution": {"wc/split/0/2"}, "stream": {"stderr"}, "tail": {"16777216"}}
			assert.Equal(t, want, asked[0])
			want.Set("follow", "1")
			assert.Equal(t, want, asked[1])
			assert.Equal(t, []string{"submit-secret", "submit-secret"}, route.tokens, "the route needs the client's token")
		})
	}

	// The executor's word that it has no such log stands.
	route := &routeRecorder{answer: relayedLog("never\n")}
	missing := answering(http.StatusNotFound, "no logs for execution wc/split/0/2")
	master := logsCluster(t, []api.Executor{{ID: "e1", HTTPAddr: missing, Status: "alive"}}, route.serve)
	c := newTestClient(t, master.addr())
	_, err := c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout})
	require.ErrorContains(t, err, `executor "e1", logs of wc/split/0/2: no logs for execution wc/split/0/2 (HTTP 404)`)
	assert.Empty(t, route.asked(), "a 404 from the executor went to the masters")
}

// When the masters cannot relay the log either, the error names both
// failures, the executor's first, and each stays matchable.
func TestLogsFailingBothWaysNameBoth(t *testing.T) {
	dead := deadAddr(t)
	route := &routeRecorder{answer: func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, api.Error{Error: `permission denied: token "dashboard" (policy read) may not GET /v1/jobs/wc/logs: it needs a submit or management token`})
	}}
	master := logsCluster(t, []api.Executor{{ID: "e1", HTTPAddr: dead, Status: "alive"}}, route.serve)
	c := newTestClient(t, master.addr())
	_, err := c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout})
	require.Error(t, err)
	assert.Equal(t, `cannot reach executor "e1" at `+dead+` (status alive) for the logs of wc/split/0/2: connection refused; `+
		`nor could the masters relay it: permission denied: token "dashboard" (policy read) may not GET /v1/jobs/wc/logs: it needs a submit or management token (HTTP 403)`, err.Error())
	both, ok := errors.AsType[*LogReadError](err)
	require.True(t, ok)
	assert.Contains(t, both.Executor.Error(), "cannot reach executor")
	apiErr, ok := errors.AsType[*APIError](both.Masters)
	require.True(t, ok)
	assert.Equal(t, http.StatusForbidden, apiErr.StatusCode)
}

// A followed log through the masters ends cleanly only with the trailer
// that says it is complete: a master that breaks the connection off, or
// ends without the trailer, gives ErrLogCut after what it relayed.
func TestLogsFollowedThroughTheMastersTellACutFromTheEnd(t *testing.T) {
	cuts := map[string]http.HandlerFunc{
		"broken off": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", wire.HeaderEnd)
			_, _ = io.WriteString(w, "line 1\n")
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		},
		"no trailer": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", wire.HeaderEnd)
			_, _ = io.WriteString(w, "line 1\n")
		},
	}
	for name, answer := range cuts {
		t.Run(name, func(t *testing.T) {
			route := &routeRecorder{answer: answer}
			master := logsCluster(t, []api.Executor{{ID: "e1", HTTPAddr: deadAddr(t), Status: "lost"}}, route.serve)
			c := newTestClient(t, master.addr())
			l, err := c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout, Follow: true})
			require.NoError(t, err)
			defer l.Close()
			b, err := io.ReadAll(l)
			assert.Equal(t, "line 1\n", string(b))
			require.ErrorIs(t, err, ErrLogCut)
		})
	}
}

// ViaMasters asks no executor, nor the cluster for one.
func TestLogsViaMastersAskNoExecutor(t *testing.T) {
	exec := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "from the executor\n") })
	route := &routeRecorder{answer: relayedLog("from a master\n")}
	master := logsCluster(t, []api.Executor{{ID: "e1", HTTPAddr: exec.addr(), Status: "alive"}}, route.serve)
	c := newTestClient(t, master.addr())
	l, err := c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout, ViaMasters: true})
	require.NoError(t, err)
	assert.Equal(t, "from a master\n", readAll(t, l))
	assert.Nil(t, l.ExecutorErr)
	assert.Zero(t, exec.hits.Load())
	assert.Equal(t, int64(2), master.hits.Load(), "the job and its log: no read of the cluster")

	attempt := 1
	l, err = c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout, ViaMasters: true, Attempt: &attempt})
	require.NoError(t, err)
	_ = readAll(t, l)
	asked := route.asked()
	require.Len(t, asked, 2)
	assert.Equal(t, "wc/split/0/1", asked[1].Get("execution"))
	assert.Zero(t, exec.hits.Load())

	attempt = 3
	_, err = c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout, ViaMasters: true, Attempt: &attempt})
	require.ErrorContains(t, err, `subtask split[0] of job "wc" is at attempt 2: no attempt 3`)
}

// The attempt before the current one is asked first of the executor the
// job's answer says it ran on, and read through the masters when that one
// cannot be reached; an older attempt, which the masters do not relay, is
// not.
func TestEarlierAttemptLogsThroughTheMasters(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	current := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Query().Get("id"))
		mu.Unlock()
		writeJSON(w, http.StatusNotFound, api.Error{Error: "no logs for execution " + r.URL.Query().Get("id")})
	})
	dead := deadAddr(t)
	route := &routeRecorder{answer: relayedLog("attempt 1\n")}
	master := logsCluster(t, []api.Executor{
		{ID: "e1", HTTPAddr: current.addr(), Status: "alive"},
		{ID: "e2", HTTPAddr: dead, Status: "alive"},
	}, route.serve)
	c := newTestClient(t, master.addr())

	attempt := 1
	l, err := c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout, Attempt: &attempt})
	require.NoError(t, err)
	assert.Equal(t, "attempt 1\n", readAll(t, l))
	require.Error(t, l.ExecutorErr)
	assert.Contains(t, l.ExecutorErr.Error(), `cannot reach executor "e2"`)
	assert.Empty(t, asked, "the executor the state names was not asked first")
	require.Len(t, route.asked(), 1)
	assert.Equal(t, "wc/split/0/1", route.asked()[0].Get("execution"))

	attempt = 0
	_, err = c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout, Attempt: &attempt})
	require.ErrorContains(t, err, "the logs of wc/split/0/0 (attempt 0 of split[0]) are on no executor that answered, and 1 could not be asked: e2 (no answer); one of those may have them")
	assert.Equal(t, []string{"wc/split/0/0"}, asked)
	assert.Len(t, route.asked(), 1, "an attempt older than the one before the current one went to the masters")
}

// The route is asked of one master after another, from the one that
// answered last, while they are busy or do not reach the executor; a
// refusal of the token is final.
func TestLogsThroughTheMastersFailOver(t *testing.T) {
	dead := deadAddr(t)
	execs := []api.Executor{{ID: "e1", HTTPAddr: dead, Status: "alive"}}
	unreaching := &routeRecorder{answer: func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusBadGateway, api.Error{Error: "executor e1 at " + dead + ", which runs or ran wc/split/0/2, does not answer"})
	}}
	busy := &routeRecorder{answer: func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "master m2 relays 256 logs already"})
	}}
	reaching := &routeRecorder{answer: relayedLog("through m3\n")}
	m1, m2, m3 := logsCluster(t, execs, unreaching.serve), logsCluster(t, execs, busy.serve), logsCluster(t, execs, reaching.serve)
	c := newTestClient(t, m1.addr()+","+deadAddr(t)+","+m2.addr()+","+m3.addr())
	l, err := c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout})
	require.NoError(t, err)
	assert.Equal(t, "through m3\n", readAll(t, l))
	assert.Equal(t, "http://"+m3.addr(), l.Master)
	assert.Len(t, unreaching.asked(), 1)
	assert.Len(t, busy.asked(), 1)

	// None reaches it: the first master's answer says why.
	c = newTestClient(t, m1.addr()+","+m2.addr())
	_, err = c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout})
	require.ErrorContains(t, err, "; nor could the masters relay it: master "+m1.addr()+": executor e1 at "+dead+", which runs or ran wc/split/0/2, does not answer (HTTP 502)")

	refusing := &routeRecorder{answer: func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusUnauthorized, api.Error{Error: "no token"})
	}}
	m4 := logsCluster(t, execs, refusing.serve)
	c = newTestClient(t, m4.addr()+","+m3.addr())
	_, err = c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout})
	require.ErrorContains(t, err, "nor could the masters relay it: no token (HTTP 401)")
	assert.Len(t, reaching.asked(), 1, "a refused token was tried on another master")
}

// A log read at once through a master is at most api.LogTailMax bytes: an
// answer that long may lack the log's start, and says so.
func TestLogsThroughTheMastersMayLackTheStart(t *testing.T) {
	for _, n := range []int{api.LogTailMax - 1, api.LogTailMax} {
		route := &routeRecorder{answer: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(n))
			_, _ = io.CopyN(w, zeros{}, int64(n))
		}}
		master := logsCluster(t, nil, route.serve)
		c := newTestClient(t, master.addr())
		l, err := c.LogsOf(context.Background(), "wc", "split", 0, LogOptions{Stream: Stdout, ViaMasters: true})
		require.NoError(t, err)
		got, err := io.Copy(io.Discard, l)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		assert.Equal(t, int64(n), got)
		assert.Equal(t, n == api.LogTailMax, l.MayLackStart, "%d bytes", n)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
