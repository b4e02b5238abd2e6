package master

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// scrape reads master i's /v1/metrics into metric families, with the
// request headers given (name, value, ...).
func (c *testCluster) scrape(i int, headers ...string) map[string]*metricFamily {
	c.t.Helper()
	r := do(c.t, http.MethodGet, c.url(i, "/v1/metrics"), nil, headers...)
	require.Equal(c.t, http.StatusOK, r.status, "%s", r.body)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(r.body)))
	require.NoError(c.t, err)
	out := make(map[string]*metricFamily, len(fams))
	for name, f := range fams {
		out[name] = &metricFamily{f}
	}
	return out
}

// value is the value of the sample of family name whose labels include
// labels (name=value pairs); -1 if there is none.
func value(fams map[string]*metricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	return f.value(labels...)
}

func TestMetricsOnEveryMaster(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	requireAccepted(t, do(t, http.MethodPut, c.url(c.follower(), "/v1/jobs/m-1"), []byte(simpleJob)))
	do(t, http.MethodGet, c.url(l, "/v1/jobs/m-1"), nil)
	do(t, http.MethodGet, c.url(l, "/v1/jobs/nope"), nil)
	c.waitSameState()

	for i := range c.masters {
		fams := c.scrape(i)
		// From the state, on every master: the job waits for an executor.
		require.Equal(t, 1.0, value(fams, "jobmaster_jobs", "status", "CREATED"), "master %d", i)
		require.Equal(t, 0.0, value(fams, "jobmaster_jobs", "status", "FINISHED"))
		require.Equal(t, 2.0, value(fams, "jobmaster_executions", "state", "SCHEDULED"))
		require.Equal(t, float64(mustSpec(t, simpleJob).Footprint()), value(fams, "jobmaster_job_spec_bytes"))
		require.Greater(t, value(fams, "jobmaster_fencing_token"), 0.0)
		require.Greater(t, value(fams, "jobmaster_raft_term"), 0.0)
		require.Equal(t, 1.0, value(fams, "jobmaster_leader_info", "leader", c.masters[l].ID()))
		isLeader := 0.0
		if i == l {
			isLeader = 1
		}
		require.Equal(t, isLeader, value(fams, "jobmaster_is_leader"), "master %d", i)
		// Raft's own, through go-metrics.
		require.NotNil(t, fams["jobmaster_raft_fsm_applyBatch"], "raft's FSM apply time")
		require.NotNil(t, fams["jobmaster_raft_commitTime"], "raft's commit time")
		require.NotNil(t, fams["go_goroutines"])
	}
	fams := c.scrape(l)
	require.Equal(t, 0.0, value(fams, "jobmaster_executors", "status", "alive"), "no executor in this cluster")
	require.Equal(t, 0.0, value(fams, "jobmaster_reconcile_actions_total", "action", "unknown_cancelled"))
	require.Equal(t, 1.0, value(fams, "jobmaster_http_requests_total", "route", "/v1/jobs/{id}", "method", "GET", "code", "200"))
	require.Equal(t, 1.0, value(fams, "jobmaster_http_requests_total", "route", "/v1/jobs/{id}", "method", "GET", "code", "404"))
	require.Equal(t, 1.0, value(fams, "jobmaster_http_requests_total", "route", "/v1/internal/submit-batch", "method", "POST", "code", "200"),
		"the PUT, relayed to the leader in a batch")
	f := c.follower()
	require.Equal(t, 1.0, value(c.scrape(f), "jobmaster_http_requests_total", "route", "/v1/jobs/{id}", "method", "PUT", "code", "201"),
		"the PUT, as the follower answered it")
	require.Equal(t, 1.0, value(c.scrape(f), "jobmaster_relayed_submissions_total"))
	require.Equal(t, 1.0, value(c.scrape(f), "jobmaster_relay_batches_total", "outcome", "answered"))
	require.Equal(t, -1.0, value(fams, "jobmaster_http_requests_total", "route", "/v1/jobs/m-1"), "routes are patterns")
}

// With ACLs on, a request's route is its pattern too (authorize passes a
// copy of the request on, which the mux gives its pattern), and an event
// stream is counted, not timed.
func TestMetricsCountRoutesWithACLs(t *testing.T) {
	c, _ := aclCluster(t)
	l := c.leader()
	root := tokenOf(t, do(t, http.MethodPost, c.url(l, "/v1/acl/bootstrap"), nil))
	do(t, http.MethodGet, c.url(l, "/v1/jobs/nope"), nil, auth(root.SecretID)...)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(l, eventsPath+"?index=0"), nil)
	require.NoError(t, err)
	req.Header.Set("X-Jobmaster-Token", root.SecretID)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cancel()
	resp.Body.Close()

	fams := c.scrape(l, auth(root.SecretID)...)
	require.Equal(t, 1.0, value(fams, "jobmaster_http_requests_total", "route", "/v1/jobs/{id}", "method", "GET", "code", "404"))
	require.Equal(t, -1.0, value(fams, "jobmaster_http_requests_total", "route", "unmatched", "method", "GET", "code", "404"))
	require.Eventually(t, func() bool {
		return value(c.scrape(l, auth(root.SecretID)...), "jobmaster_http_requests_total", "route", eventsPath, "method", "GET", "code", "200") == 1
	}, 10*time.Second, 20*time.Millisecond, "the stream, counted once it ended")
	require.Equal(t, -1.0, value(c.scrape(l, auth(root.SecretID)...), "jobmaster_http_request_duration_seconds_count", "route", eventsPath), "a stream is not timed")
}
