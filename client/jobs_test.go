package client

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
)

func TestSubmitJob(t *testing.T) {
	tests := []struct {
		status      int
		wantCreated bool
		wantStatus  int // of the APIError; 0: no error
	}{
		{status: http.StatusCreated, wantCreated: true},
		{status: http.StatusOK, wantCreated: false},
		{status: http.StatusConflict, wantStatus: http.StatusConflict},
		{status: http.StatusBadRequest, wantStatus: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			var method, path, body string
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				method, path, body = r.Method, r.URL.EscapedPath(), string(b)
				if tt.status >= 400 {
					writeJSON(w, tt.status, api.Error{Error: "bad"})
					return
				}
				writeJSON(w, tt.status, api.SubmitResponse{ID: "wc 1"})
			})
			c := newTestClient(t, s.addr())
			created, err := c.SubmitJob(context.Background(), "wc 1", []byte(`{"name":"wc"}`))
			assert.Equal(t, http.MethodPut, method)
			assert.Equal(t, "/v1/jobs/wc%201", path)
			assert.Equal(t, `{"name":"wc"}`, body)
			if tt.wantStatus != 0 {
				var apiErr *APIError
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, tt.wantStatus, apiErr.StatusCode)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantCreated, created)
		})
	}
}

func TestCreateJob(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/jobs" {
			writeJSON(w, http.StatusNotFound, api.Error{Error: "wrong route"})
			return
		}
		writeJSON(w, http.StatusCreated, api.SubmitResponse{ID: "wc-7"})
	})
	c := newTestClient(t, s.addr())
	id, err := c.CreateJob(context.Background(), []byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, "wc-7", id)
}

func TestCreateJobWithoutID(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, map[string]string{})
	})
	c := newTestClient(t, s.addr())
	_, err := c.CreateJob(context.Background(), []byte(`{}`))
	require.ErrorContains(t, err, "no job id")
}

func TestJobAndNotFound(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/jobs/wc" {
			writeJSON(w, http.StatusOK, api.Job{ID: "wc", Status: "RUNNING", Vertices: []api.Vertex{{ID: "split", Parallelism: 1}}})
			return
		}
		writeJSON(w, http.StatusNotFound, api.Error{Error: "job not found"})
	})
	c := newTestClient(t, s.addr())

	job, err := c.Job(context.Background(), "wc")
	require.NoError(t, err)
	assert.Equal(t, "RUNNING", job.Status)
	assert.Equal(t, "split", job.Vertices[0].ID)

	_, err = c.Job(context.Background(), "other")
	assert.True(t, IsNotFound(err))
	assert.EqualError(t, err, "job not found (HTTP 404)")
}

func TestMalformedAnswer(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "<html>")
	})
	c := newTestClient(t, s.addr())
	_, err := c.Jobs(context.Background())
	require.ErrorContains(t, err, "GET /v1/jobs at "+s.addr()+": malformed answer")
}

func TestCancelJob(t *testing.T) {
	var method, path string
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		method, path = r.Method, r.URL.Path
		w.WriteHeader(http.StatusAccepted)
	})
	c := newTestClient(t, s.addr())
	require.NoError(t, c.CancelJob(context.Background(), "wc"))
	assert.Equal(t, http.MethodPost, method)
	assert.Equal(t, "/v1/jobs/wc/cancel", path)
}

func TestCancelJobIsRetriedOnAnotherMaster(t *testing.T) {
	unavailable := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader"})
	})
	good := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	})
	c := newTestClient(t, unavailable.addr()+","+good.addr())
	require.NoError(t, c.CancelJob(context.Background(), "wc"))
	assert.Equal(t, int64(1), good.hits.Load())
}

func TestCluster(t *testing.T) {
	leader := "m1"
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, api.Cluster{Leader: &leader, FencingToken: 7,
			Masters: []api.Master{{ID: "m1", HTTPAddr: "a:1", Role: "leader"}}})
	})
	c := newTestClient(t, s.addr())
	cl, err := c.Cluster(context.Background())
	require.NoError(t, err)
	require.NotNil(t, cl.Leader)
	assert.Equal(t, "m1", *cl.Leader)
	assert.Equal(t, uint64(7), cl.FencingToken)
}

func TestHealth(t *testing.T) {
	leader := "m1"
	healthy := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, api.Health{Leader: &leader, Node: "m2"})
	})
	noLeader := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, api.Health{Node: "m3"})
	})
	c := newTestClient(t, healthy.addr())

	h, err := c.Health(context.Background(), noLeader.addr())
	require.NoError(t, err)
	assert.Nil(t, h.Leader)
	assert.Equal(t, "m3", h.Node)
	assert.Equal(t, int64(0), healthy.hits.Load(), "Health asks only the given master")

	h, err = c.Health(context.Background(), "http://"+healthy.addr())
	require.NoError(t, err)
	require.NotNil(t, h.Leader)
	assert.Equal(t, "m1", *h.Leader)

	dead := deadAddr(t)
	_, err = c.Health(context.Background(), dead)
	require.ErrorContains(t, err, "GET /v1/health at "+dead+": connection refused")

	_, err = c.Health(context.Background(), "nonsense")
	require.ErrorContains(t, err, "invalid address")
}
