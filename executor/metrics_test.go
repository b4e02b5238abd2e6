package executor

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/transport"
	"jobmaster/wire"
)

// metric reads one sample of the executor's /v1/metrics, by its whole
// name and labels as the text format writes them; -1 if absent.
func metric(t *testing.T, e *Executor, series string) float64 {
	t.Helper()
	l := newLeader(t, e, 0)
	code, body := l.do(http.MethodGet, "/v1/metrics", nil)
	require.Equal(t, http.StatusOK, code)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return v
}

func TestExecutorMetricsMoveWithWhatHappens(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := startExecutor(t, Config{Lease: time.Hour, Now: clock.Now, Slots: 3})
	l := newLeader(t, e, 5)
	l.heartbeat()
	l.deploy(simTask("j", 0, time.Hour, 0), simTask("j", 1, time.Hour, 0))
	require.Equal(t, 2.0, metric(t, e, `jobmaster_executor_tasks{state="RUNNING"}`))
	require.Equal(t, 3.0, metric(t, e, `jobmaster_executor_slots`))
	require.Equal(t, 2.0, metric(t, e, `jobmaster_executor_slots_used`))
	require.Equal(t, 5.0, metric(t, e, `jobmaster_executor_fencing_token`))
	for _, reason := range []string{"age", "disk", "disk_full"} {
		require.Equal(t, 0.0, metric(t, e, `jobmaster_executor_gc_deleted_total{reason="`+reason+`"}`), "every reason a query may name is there from the start")
	}
	require.Equal(t, time.Hour.Seconds(), metric(t, e, `jobmaster_executor_lease_remaining_seconds`), "sim: the fence time is the lease")

	// A stale leader is refused, and counted.
	old := newLeader(t, e, 4)
	code, _ := old.post(wire.PathHeartbeat, wire.HeartbeatRequest{Leader: old.hdr()})
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, 1.0, metric(t, e, `jobmaster_executor_fencing_refusals_total{request="leader"}`))
	require.Equal(t, 0.0, metric(t, e, `jobmaster_executor_fencing_refusals_total{request="fetch"}`))

	// The lease runs out: the executor fences itself, once.
	clock.Advance(61 * time.Minute)
	l.cancel() // any leader request checks the lease first; a cancel renews nothing
	st := l.waitState("j/v/0/0", wire.StateCanceled)
	require.Contains(t, st.Message, "lease expired")
	require.Equal(t, 1.0, metric(t, e, `jobmaster_executor_self_fences_total`))
	require.Equal(t, 0.0, metric(t, e, `jobmaster_executor_lease_remaining_seconds`))
	require.Equal(t, 2.0, metric(t, e, `jobmaster_executor_tasks{state="CANCELED"}`))

	// Every answer says it is an executor's, and requests are counted by
	// route.
	resp, err := httpClient.Get("http://" + e.Addr() + "/v1/jobs")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, transport.RoleExecutor, resp.Header.Get(transport.RoleHeader))
	require.Equal(t, 1.0, metric(t, e, `jobmaster_http_requests_total{code="404",method="GET",route="unmatched"}`))
	require.Equal(t, 1.0, metric(t, e, `jobmaster_http_requests_total{code="409",method="POST",route="/v1/internal/heartbeat"}`))
}

// A new executor that no leader has heartbeated has no lease to lose: its
// lease running out is not a self-fence (new executors waiting for their
// cluster to form would page someone). Once it has had a leader, the
// lease running out counts, even with no task to stop.
func TestSelfFenceCountsOnlyAfterALeader(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := startExecutor(t, Config{Lease: time.Hour, Now: clock.Now, Slots: 1})
	clock.Advance(61 * time.Minute)
	l := newLeader(t, e, 5)
	l.cancel() // any leader request checks the lease first
	require.Equal(t, 0.0, metric(t, e, `jobmaster_executor_self_fences_total`))

	l.heartbeat()
	clock.Advance(61 * time.Minute)
	l.cancel()
	require.Equal(t, 1.0, metric(t, e, `jobmaster_executor_self_fences_total`))

	// Restarted on its data dir (the leader's token stored there), it has
	// had no leader since it started: no lease to lose again.
	dir := e.cfg.DataDir
	require.NoError(t, e.Shutdown(context.Background()))
	again := startExecutor(t, Config{Lease: time.Hour, Now: clock.Now, Slots: 1, DataDir: dir})
	clock.Advance(61 * time.Minute)
	newLeader(t, again, 5).cancel()
	require.Equal(t, 0.0, metric(t, again, `jobmaster_executor_self_fences_total`))
}
