package master

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/wire"
)

// goleak: memberlist's Shutdown does not wait for a probe in flight.
var leakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"),
	goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
}

func TestThreeMastersReplicateAndFailOver(t *testing.T) {
	defer goleak.VerifyNone(t, append(leakOptions, goleak.IgnoreCurrent())...)
	c := newTestCluster(t, 3)
	l := c.leader()
	token1 := c.masters[l].Token()
	require.NotZero(t, token1)

	// A job submitted to a follower is readable from every master.
	f := c.follower()
	r := do(t, "PUT", c.url(f, "/v1/jobs/wc"), []byte(simpleJob))
	requireAccepted(t, r)
	require.Equal(t, "wc", decode[api.SubmitResponse](t, r).ID)
	for i := range c.masters {
		r := do(t, "GET", c.url(i, "/v1/jobs/wc"), nil)
		require.Equal(t, http.StatusOK, r.status, "master %d: %s", i, r.body)
		j := decode[api.Job](t, r)
		require.Equal(t, "simple", j.Name)
		require.Len(t, j.Vertices[0].Subtasks, 2)
	}
	c.waitSameState()

	// /v1/cluster names the leader and the token; every master has a role.
	cl := decode[api.Cluster](t, do(t, "GET", c.url(f, "/v1/cluster"), nil))
	require.Equal(t, c.masters[l].ID(), *cl.Leader)
	require.Equal(t, token1, cl.FencingToken)
	roles := map[string]string{}
	for _, m := range cl.Masters {
		roles[m.ID] = m.Role
		require.NotEmpty(t, m.HTTPAddr)
	}
	require.Equal(t, map[string]string{"m1": "follower", "m2": "follower", "m3": "follower", c.masters[l].ID(): "leader"}, roles)

	// Kill the leader: another takes over with a higher token, and writes
	// resume through any surviving master.
	c.stop(l)
	l2 := c.leader()
	require.NotEqual(t, l, l2)
	token2 := c.masters[l2].Token()
	require.Greater(t, token2, token1)
	for i, m := range c.masters {
		if m == nil {
			continue
		}
		requireAccepted(t, do(t, "PUT", c.url(i, fmt.Sprintf("/v1/jobs/after-%d", i)), []byte(simpleJob)))
	}
	r = do(t, "GET", c.url(l2, "/v1/jobs"), nil)
	require.Len(t, decode[api.JobList](t, r).Jobs, 3)
	c.stopAll()
}

func TestStaleTokenCommandIsIgnored(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	m := c.masters[l]
	old := m.Token()
	// Force a new epoch on the same leader: a new establish-leadership.
	_, err := m.prop.ProposeOne(context.Background(), &fsm.EstablishLeadership{Node: m.ID()})
	require.NoError(t, err)
	_, err = m.prop.ProposeOne(context.Background(), &fsm.SubmitJob{Fenced: fsm.Fenced{Token: old}, ID: "x", Spec: mustSpec(t, simpleJob)})
	require.ErrorIs(t, err, fsm.ErrStaleToken)
	hash := c.waitSameState()
	for i := range c.masters {
		r := do(t, "GET", c.url(i, "/v1/jobs/x?stale"), nil)
		require.Equal(t, http.StatusNotFound, r.status)
	}
	require.NotEmpty(t, hash)
}

func TestRestartAllMastersKeepsEveryJob(t *testing.T) {
	c := newTestCluster(t, 3)
	for i := 0; i < 20; i++ {
		requireAccepted(t, do(t, "PUT", c.url(i%3, fmt.Sprintf("/v1/jobs/j%d", i)), []byte(simpleJob)))
	}
	before := c.waitSameState()
	// Snapshot one master so that restart goes through a snapshot too.
	require.NoError(t, c.masters[0].Raft().Snapshot().Error())
	c.stopAll()
	for i := range c.masters {
		c.start(i)
	}
	l := c.leader()
	r := do(t, "GET", c.url(l, "/v1/jobs"), nil)
	require.Len(t, decode[api.JobList](t, r).Jobs, 20)
	// Same jobs; the state differs only by the new epoch.
	for i := 0; i < 20; i++ {
		require.Equal(t, http.StatusOK, do(t, "GET", c.url(i%3, fmt.Sprintf("/v1/jobs/j%d", i)), nil).status)
	}
	require.NotEmpty(t, before)
	c.waitSameState()
}

func TestSubmitIsIdempotentAcrossMasters(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.JobRetention = time.Hour })
	c.leader()
	r := do(t, "PUT", c.url(0, "/v1/jobs/a"), []byte(simpleJob))
	requireAccepted(t, r)
	for i := range c.masters {
		r := do(t, "PUT", c.url(i, "/v1/jobs/a"), []byte(simpleJob))
		require.Equal(t, http.StatusOK, r.status, "same spec again: %s", r.body)
	}
	r = do(t, "PUT", c.url(1, "/v1/jobs/a"), []byte(`{"vertices":[{"id":"other","parallelism":1,"command":["x"]}]}`))
	require.Equal(t, http.StatusConflict, r.status)
	require.Contains(t, decode[api.Error](t, r).Error, "different spec")
	require.NotContains(t, decode[api.Error](t, r).Error, "ended", "a job that runs")

	// The id of an ended job: the answer says when it is free again.
	require.Equal(t, http.StatusAccepted, do(t, "POST", c.url(0, "/v1/jobs/a/cancel"), nil).status)
	waitFor(t, "a CANCELED", func() bool { return decode[api.Job](t, do(t, "GET", c.url(0, "/v1/jobs/a"), nil)).Status == "CANCELED" })
	r = do(t, "PUT", c.url(2, "/v1/jobs/a"), []byte(`{"vertices":[{"id":"other","parallelism":1,"command":["x"]}]}`))
	require.Equal(t, http.StatusConflict, r.status)
	require.Contains(t, decode[api.Error](t, r).Error, "it ended (CANCELED), and its id is free again once it is forgotten, --job-retention (1h0m0s) after it ended")

	// POST chooses the id, prefixed with the name.
	r = do(t, "POST", c.url(2, "/v1/jobs"), []byte(simpleJob))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	id := decode[api.SubmitResponse](t, r).ID
	require.True(t, strings.HasPrefix(id, "simple-"), id)
	require.Equal(t, http.StatusOK, do(t, "GET", c.url(0, "/v1/jobs/"+id), nil).status)
}

func TestBadInputGetsClearErrors(t *testing.T) {
	c := newTestCluster(t, 3)
	c.leader()
	big := `{"name":"` + strings.Repeat("x", 1<<20) + `","vertices":[]}`
	cases := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"PUT", "/v1/jobs/a", `{"vertices": [`, 400, "malformed JSON"},
		{"PUT", "/v1/jobs/a", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}],"extra":1}`, 400, "extra: unknown field"},
		{"PUT", "/v1/jobs/a", `{"vertices":[{"id":"v","parallelism":1,"command":["x"],"inputs":[{"from":"v"}]}]}`, 400, "cycle"},
		{"PUT", "/v1/jobs/a", `{"vertices":[{"id":"v","parallelism":1,"command":["x"],"inputs":[{"from":"w"}]}]}`, 400, `unknown vertex "w"`},
		{"PUT", "/v1/jobs/a", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]},{"id":"v","parallelism":1,"command":["x"]}]}`, 400, "duplicate vertex id"},
		{"PUT", "/v1/jobs/a", `{"vertices":[{"id":"v","parallelism":0,"command":["x"]}]}`, 400, "parallelism"},
		{"PUT", "/v1/jobs/a", `{"vertices":[{"id":"v","parallelism":10001,"command":["x"]}]}`, 400, "parallelism"},
		{"PUT", "/v1/jobs/a", `{"vertices":[{"id":"v","parallelism":1,"command":[]}]}`, 400, "command"},
		{"PUT", "/v1/jobs/a", big, 413, "larger than"},
		{"POST", "/v1/jobs", big, 413, "larger than"},
		{"PUT", "/v1/jobs/a%2Fb", simpleJob, 400, "job id"},
		{"PUT", "/v1/jobs/..", simpleJob, 400, `job id: ".." is not allowed`},
		{"PUT", "/v1/jobs/-x", simpleJob, 400, `job id: "-x" starts with '-'`},
		{"GET", "/v1/jobs/.", "", 400, `job id: "." is not allowed`},
		{"POST", "/v1/jobs/../cancel", "", 400, `job id: ".." is not allowed`},
		{"GET", "//v1/jobs", "", 400, "not canonical"},
		{"GET", "/v1/jobs/a/../b", "", 400, "not canonical"},
		{"GET", "/v1/jobs/nope", "", 404, `job "nope" not found`},
		{"POST", "/v1/jobs/nope/cancel", "", 404, "not found"},
		{"GET", "/v1/jobs/" + strings.Repeat("j", 5000), "", 400, "job id: longer than 128 characters"},
		{"POST", "/v1/jobs/a%20b/cancel", "", 400, `job id: "a b" has the character ' '`},
		{"DELETE", "/v1/jobs", "", 405, "not allowed"},
		{"GET", "/v1/jobs?stail", "", 400, `unknown query parameter "stail": this endpoint takes stale, status, prefix`},
		{"GET", "/v1/jobs?status=RUNNING,DONE", "", 400, `status "DONE": want one or more of CREATED, RUNNING,`},
		{"GET", "/v1/jobs/a?follow=1", "", 400, `unknown query parameter "follow"`},
		{"GET", "/v1/cluster?stale&x=1", "", 400, `unknown query parameter "x": this endpoint takes stale`},
		{"GET", "/v2/whatever", "", 404, "no such endpoint"},
		{"POST", "/v1/internal/executor-update", "{", 400, "malformed report"},
	}
	// A report in binary that is not one, and one of a revision no
	// master of this release reads.
	for _, tc := range []struct {
		contentType string
		status      int
		want        string
	}{
		{wire.ReportType, 400, "malformed report: malformed binary body"},
		{wire.BinaryType, 415, "a binary report of a revision this master does not read"},
		{"application/octet-stream; report=2", 415, "send it as JSON"},
	} {
		for i := range c.masters {
			req, err := http.NewRequest(http.MethodPost, c.url(i, wire.PathExecutorUpdate), strings.NewReader("\xd3\x06"))
			require.NoError(t, err)
			req.Header.Set("Content-Type", tc.contentType)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.contentType, b)
			require.Contains(t, string(b), tc.want, tc.contentType)
		}
	}
	for _, tc := range cases {
		for i := range c.masters {
			r := do(t, tc.method, c.url(i, tc.path), []byte(tc.body))
			require.Equal(t, tc.status, r.status, "%s %s on master %d: %s", tc.method, tc.path, i, r.body)
			require.Contains(t, decode[api.Error](t, r).Error, tc.want, "%s %s", tc.method, tc.path)
		}
	}
}

func TestRequestsDuringElectionWaitThen503(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	// Stop two masters: the last cannot elect a leader.
	var last int
	for i := range c.masters {
		if i != l {
			last = i
		}
	}
	for i := range c.masters {
		if i != last {
			c.stop(i)
		}
	}
	c.masters[last].cfg.RequestWait = 300 * time.Millisecond
	waitFor(t, "the last master to lose its leader", func() bool {
		return do(t, "GET", c.url(last, "/v1/health"), nil).status == http.StatusServiceUnavailable
	})
	r := do(t, "PUT", c.url(last, "/v1/jobs/x"), []byte(simpleJob))
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Contains(t, decode[api.Error](t, r).Error, "no leader")
	// Stale reads still work.
	require.Equal(t, http.StatusOK, do(t, "GET", c.url(last, "/v1/jobs?stale"), nil).status)
}

func TestEndedJobsAreForgottenAfterTheRetention(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.JobRetention = 200 * time.Millisecond })
	l := c.leader()
	// Cancel a job (it ends at once: nothing was placed): the collector
	// forgets it after the retention.
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/old"), []byte(simpleJob)))
	require.Equal(t, http.StatusAccepted, do(t, "POST", c.url(l, "/v1/jobs/old/cancel"), nil).status)
	require.Equal(t, "CANCELED", decode[api.Job](t, do(t, "GET", c.url(l, "/v1/jobs/old"), nil)).Status)
	waitFor(t, "the ended job to be forgotten", func() bool {
		return do(t, "GET", c.url(l, "/v1/jobs/old"), nil).status == http.StatusNotFound
	})
	require.Contains(t, string(do(t, "GET", c.url(l, "/v1/jobs/old"), nil).body), "a job of this id ended and was forgotten at", "the answer says why")
	waitFor(t, "its tombstone to be pruned after another retention", func() bool {
		var oldest int64
		c.masters[l].FSM().Read(func(st *fsm.State) { oldest = st.OldestTombstone() })
		return oldest == 0
	})
	c.waitSameState()
}
