package master

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A read of a big job waits for room in the budget of the master it is
// sent to, which answers it or forwards it (and holds the answer either
// way): with a follower's whole budget held, the read of a job of 1,500
// subtasks sent there gets no answer (its client gives up), though the
// leader's budget is free; a small job is read whatever the budget; once
// the budget is given back, the big read is answered.
func TestBigJobReadsShareABudget(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	f := c.follower()
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/big"), []byte(`{"vertices":[{"id":"v","parallelism":1500,"command":["x"]}]}`)))
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/small"), []byte(`{"vertices":[{"id":"v","parallelism":2,"command":["x"]}]}`)))
	c.waitSameState()

	for _, i := range []int{f, l} {
		m := c.masters[i]
		require.NoError(t, m.bigReads.Acquire(context.Background(), readBudget))
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		req, err := http.NewRequestWithContext(ctx, "GET", c.url(i, "/v1/jobs/big"), nil)
		require.NoError(t, err)
		_, err = http.DefaultClient.Do(req)
		cancel()
		require.True(t, errors.Is(err, context.DeadlineExceeded), "master %d answered a big job's read with its budget taken: %v", i, err)
		require.Equal(t, http.StatusOK, do(t, "GET", c.url(i, "/v1/jobs/small"), nil).status)

		m.bigReads.Release(readBudget)
		require.Equal(t, http.StatusOK, do(t, "GET", c.url(i, "/v1/jobs/big"), nil).status)
	}
}
