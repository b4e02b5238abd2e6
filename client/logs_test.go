package client

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/transport"
	"jobmaster/wire"
)

// logsCluster is a fake master that knows one job and the given executors,
// and serves the masters' log route (GET /v1/jobs/wc/logs) with route, if
// given.
func logsCluster(t *testing.T, executors []api.Executor, route ...http.HandlerFunc) *server {
	job := api.Job{ID: "wc", Status: "RUNNING", Vertices: []api.Vertex{
		{ID: "split", Parallelism: 2, Subtasks: []api.Subtask{
			{Index: 0, State: "RUNNING", Executor: "e1", ExecutionID: "wc/split/0/2", Attempt: 2,
				PreviousAttempt: &api.PreviousAttempt{Attempt: 1, State: "FAILED", Executor: "e2"}},
			{Index: 1, State: "SCHEDULED"},
		}},
		{ID: "count", Parallelism: 1, Subtasks: []api.Subtask{
			{Index: 0, State: "RUNNING", Executor: "gone", ExecutionID: "wc/count/0/0"},
		}},
	}}
	return newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/jobs/wc":
			writeJSON(w, http.StatusOK, job)
		case "/v1/cluster":
			writeJSON(w, http.StatusOK, api.Cluster{Executors: executors})
		case "/v1/jobs/wc/logs":
			if len(route) > 0 {
				route[0](w, r)
				return
			}
			writeJSON(w, http.StatusNotFound, api.Error{Error: "not found"})
		default:
			writeJSON(w, http.StatusNotFound, api.Error{Error: "not found"})
		}
	})
}

func TestLogs(t *testing.T) {
	var query string
	exec := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		if r.URL.Path != wire.PathLogs {
			writeJSON(w, http.StatusNotFound, api.Error{Error: "no route"})
			return
		}
		_, _ = io.WriteString(w, "hello from "+r.URL.Query().Get("stream")+"\n")
	})
	master := logsCluster(t, []api.Executor{{ID: "e1", HTTPAddr: exec.addr(), Status: "alive"}})
	c := newTestClient(t, master.addr())

	for _, stream := range []string{Stdout, Stderr} {
		rc, err := c.Logs(context.Background(), "wc", "split", 0, stream)
		require.NoError(t, err)
		data, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		assert.Equal(t, "hello from "+stream+"\n", string(data))
		assert.Equal(t, "id=wc%2Fsplit%2F0%2F2&stream="+stream, query)
	}
}

func TestLogsErrors(t *testing.T) {
	missing := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, api.Error{Error: "unknown execution"})
	})
	dead := deadAddr(t)
	tests := []struct {
		name      string
		executors []api.Executor
		job       string
		vertex    string
		subtask   int
		stream    string
		want      string
	}{
		{name: "bad stream", job: "wc", vertex: "split", stream: "stdin", want: `invalid log stream "stdin"`},
		{name: "unknown job", job: "nope", vertex: "split", stream: Stdout, want: "not found (HTTP 404)"},
		{name: "unknown vertex", job: "wc", vertex: "join", stream: Stdout, want: `job "wc" has no vertex "join" (its vertices: split, count)`},
		{name: "unknown subtask", job: "wc", vertex: "split", subtask: 5, stream: Stdout, want: `vertex "split" of job "wc" has no subtask 5 (it has subtasks 0 to 1)`},
		{name: "never ran", job: "wc", vertex: "split", subtask: 1, stream: Stdout, want: `subtask split[1] of job "wc" has not run yet (state SCHEDULED)`},
		{name: "unknown executor", job: "wc", vertex: "count", stream: Stdout, want: `executor "gone", which ran execution wc/count/0/0, is not known to the cluster`},
		{name: "unreachable executor", job: "wc", vertex: "split", stream: Stdout,
			executors: []api.Executor{{ID: "e1", HTTPAddr: dead, Status: "lost"}},
			want:      `cannot reach executor "e1" at ` + dead + ` (status lost) for the logs of wc/split/0/2: connection refused; nor could the masters relay it: `},
		{name: "executor has no logs", job: "wc", vertex: "split", stream: Stdout,
			executors: []api.Executor{{ID: "e1", HTTPAddr: missing.addr(), Status: "alive"}},
			want:      `executor "e1", logs of wc/split/0/2: unknown execution (HTTP 404)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			master := logsCluster(t, tt.executors)
			c := newTestClient(t, master.addr())
			rc, err := c.Logs(context.Background(), tt.job, tt.vertex, tt.subtask, tt.stream)
			if rc != nil {
				_ = rc.Close()
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// An executor is dialled at its host:port with the masters' scheme: an
// address a master passes on with a scheme of its own is refused.
func TestAnExecutorsAddressTakesTheMastersScheme(t *testing.T) {
	base, err := executorBase("10.0.0.4:7431", "https")
	require.NoError(t, err)
	require.Equal(t, "https://10.0.0.4:7431", base)
	_, err = executorBase("http://10.0.0.4:7431", "https")
	require.ErrorIs(t, err, transport.ErrPeerAddress)
}
