package master

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/fsm"
)

// Every GET answers HEAD too, headers only, as api.md says, and a 405
// names HEAD among the methods a GET path takes.
func TestGETsAnswerHEAD(t *testing.T) {
	c := newTestCluster(t, 1)
	l := c.leader()
	// One client, one kept-alive connection: a HEAD whose handler went on
	// streaming (the events) would hold it, and the next request would
	// time out.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1}}
	for _, p := range []string{"/v1/jobs", "/v1/cluster", "/v1/health", "/v1/state/hash", "/v1/events", "/v1/health"} {
		req, err := http.NewRequest("HEAD", c.url(l, p), nil)
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err, p)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
	}
	r := do(t, "DELETE", c.url(l, "/v1/jobs"), nil)
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
	require.Equal(t, "GET, HEAD, POST", r.header.Get("Allow"))
}

// An executor under an operator's drain stays listed when it is gone from
// the leader's table (stopped, forgotten): drained when the state has
// nothing on it a job needs, lost otherwise; a drain the executor asked
// for itself on stopping is not listed.
func TestDrainedExecutorsStayListed(t *testing.T) {
	xs := []api.Executor{{ID: "e1", Status: "alive"}, {ID: "e4", Status: "alive"}}
	drains := []fsm.Drain{{Executor: "e1"}, {Executor: "e2"}, {Executor: "e3"}, {Executor: "e5", Self: true}}
	got := withDrainedAbsent(xs, drains, map[string]bool{"e1": false, "e2": true, "e3": false, "e5": true})
	require.Equal(t, []api.Executor{
		{ID: "e1", Status: "alive"},
		{ID: "e2", Status: api.ExecutorDrained, Draining: true},
		{ID: "e3", Status: "lost", Draining: true},
		{ID: "e4", Status: "alive"},
	}, got)
}

// A job's answer says, while it has not ended, the slots it needs at once
// to start and whether it declares resources; an ended job's does not.
func TestAJobSaysWhatItNeedsToStart(t *testing.T) {
	c := newTestCluster(t, 3)
	c.leader()
	spec := `{"vertices": [
		{"id": "a", "parallelism": 3, "command": ["true"]},
		{"id": "b", "parallelism": 5, "command": ["true"], "resources": {"memory_mb": 64}, "inputs": [{"from": "a", "mode": "blocking"}]}]}`
	requireAccepted(t, do(t, http.MethodPut, c.url(c.follower(), "/v1/jobs/two"), []byte(spec)))
	job := decode[api.Job](t, do(t, http.MethodGet, c.url(0, "/v1/jobs/two"), nil))
	require.Equal(t, 3, job.StartSlots, "its first region, a")
	require.True(t, job.DeclaresResources)

	require.Equal(t, http.StatusAccepted, do(t, http.MethodPost, c.url(0, "/v1/jobs/two/cancel"), nil).status)
	job = decode[api.Job](t, do(t, http.MethodGet, c.url(0, "/v1/jobs/two"), nil))
	require.Equal(t, "CANCELED", job.Status)
	require.Zero(t, job.StartSlots)
	require.False(t, job.DeclaresResources)
}

// State hashes asked for at once are made one at a time and agree: the
// last one made answers those that find the state at its index.
func TestStateHashesAtOnceAgree(t *testing.T) {
	c := newTestCluster(t, 3)
	c.leader()
	requireAccepted(t, do(t, http.MethodPut, c.url(0, "/v1/jobs/h"), []byte(simpleJob)))
	c.waitSameState()
	made := func(m *Master) int {
		m.hashing <- struct{}{} // hashesMade is read under the hash's lock
		defer func() { <-m.hashing }()
		return m.hashesMade
	}
	before := make([]int, len(c.masters))
	for i, m := range c.masters {
		before[i] = made(m)
	}
	var wg sync.WaitGroup
	hashes := make([]api.StateHash, 20)
	for i := range hashes {
		wg.Go(func() { hashes[i] = decode[api.StateHash](t, do(t, http.MethodGet, c.url(i%3, "/v1/state/hash"), nil)) })
	}
	wg.Wait()
	for _, h := range hashes {
		require.Equal(t, hashes[0].AppliedIndex, h.AppliedIndex)
		require.Equal(t, hashes[0].Hash, h.Hash)
	}
	for i, m := range c.masters {
		require.LessOrEqual(t, made(m)-before[i], 1, "master %d made a hash at most once for its index, and kept it", i)
	}
}

// GET /v1/jobs lists the jobs of the statuses asked for (in any case,
// comma separated or the parameter repeated) whose id starts with the
// prefix asked for, on the leader and with ?stale alike.
func TestJobListFilters(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	for _, id := range []string{"wc-1", "wc-2", "etl-1"} {
		requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/"+id), []byte(simpleJob)))
	}
	ids := func(path string) []string {
		r := do(t, "GET", c.url(l, path), nil)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", path, r.body)
		var out []string
		for _, j := range decode[api.JobList](t, r).Jobs {
			out = append(out, j.ID)
		}
		return out
	}
	require.Equal(t, []string{"etl-1", "wc-1", "wc-2"}, ids("/v1/jobs"))
	require.Equal(t, []string{"wc-1", "wc-2"}, ids("/v1/jobs?prefix=wc-"))
	require.Equal(t, []string{"wc-1", "wc-2"}, ids("/v1/jobs?prefix=wc-&stale"))
	// No executor: every job waits, CREATED.
	require.Equal(t, []string{"etl-1", "wc-1", "wc-2"}, ids("/v1/jobs?status=created,FINISHED"))
	require.Equal(t, []string{"etl-1", "wc-1", "wc-2"}, ids("/v1/jobs?status=RUNNING&status=CREATED"))
	require.Empty(t, ids("/v1/jobs?status=RUNNING"))
	require.Empty(t, ids("/v1/jobs?status=CREATED&prefix=x"))
}
