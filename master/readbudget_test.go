package master

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A read of a big job waits for room in the reads' budget: with the whole
// budget held, the read of a job of 1,500 subtasks gets no answer (its
// client gives up); once it is given back, the read is answered. A small
// job is read whatever the budget.
func TestBigJobReadsShareABudget(t *testing.T) {
	c := newTestCluster(t, 1)
	l := c.leader()
	m := c.masters[l]
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/big"), []byte(`{"vertices":[{"id":"v","parallelism":1500,"command":["x"]}]}`)))
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/small"), []byte(`{"vertices":[{"id":"v","parallelism":2,"command":["x"]}]}`)))

	require.NoError(t, m.bigReads.Acquire(context.Background(), readBudget))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", c.url(l, "/v1/jobs/big"), nil)
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "a read of a big job answered with the budget taken: %v", err)
	require.Equal(t, http.StatusOK, do(t, "GET", c.url(l, "/v1/jobs/small"), nil).status)

	m.bigReads.Release(readBudget)
	require.Equal(t, http.StatusOK, do(t, "GET", c.url(l, "/v1/jobs/big"), nil).status)
}
