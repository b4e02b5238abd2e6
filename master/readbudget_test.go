package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"

	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/wire"
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

// A client that asks for a big job and stops reading gives its share of
// the budget back when the answer's write deadline passes: the handler
// behind bigRead writes more than the sockets hold, the client reads
// none of it, and the whole budget is free again once the write fails.
func TestBigReadNotReadGivesItsBudgetBack(t *testing.T) {
	m := &Master{fsm: fsm.New(), bigReads: semaphore.NewWeighted(readBudget), bigReadWrite: 200 * time.Millisecond}
	m.fsm.Apply(&raft.Log{Index: 1, Data: fsm.MustEncode(&fsm.EstablishLeadership{Node: "m1"})})
	spec, err := jobspec.Parse([]byte(`{"vertices":[{"id":"v","parallelism":1500,"command":["x"]}]}`))
	require.NoError(t, err)
	m.fsm.Apply(&raft.Log{Index: 2, Data: fsm.MustEncode(&fsm.SubmitJob{Fenced: fsm.Fenced{Token: 1}, ID: "big", Spec: spec})})

	writing := make(chan struct{})
	wrote := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/jobs/{id}", m.bigRead(func(w http.ResponseWriter, r *http.Request) {
		close(writing)
		chunk := make([]byte, 64<<10)
		for range 1024 { // 64 MB: more than any socket buffers hold
			if _, err := w.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	_, err = conn.Write([]byte("GET /v1/jobs/big HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	<-writing
	require.False(t, m.bigReads.TryAcquire(readBudget), "the read holds no share of the budget")
	select {
	case err := <-wrote:
		require.Error(t, err, "the whole answer was written to a client that read none of it")
	case <-time.After(30 * time.Second):
		t.Fatal("the answer's write to a client that stopped reading never ended")
	}
	require.Eventually(t, func() bool {
		if m.bigReads.TryAcquire(readBudget) {
			m.bigReads.Release(readBudget)
			return true
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the stalled read kept its share of the budget")
}

// Pushes share a budget of the bytes being decoded at once: with the
// leader's budget held, a push waits (its executor gives up and pushes
// again), and goes through once the budget is back.
func TestPushesShareABudget(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	m := c.masters[l]
	body := []byte(`{"version":3,"executor":"e1","partial":true,"executions":[]}`)
	require.NoError(t, m.pushes.Acquire(context.Background(), pushBudget))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	req, err := http.NewRequestWithContext(ctx, "POST", c.url(l, wire.PathExecutorUpdate), bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	_, err = http.DefaultClient.Do(req)
	cancel()
	require.True(t, errors.Is(err, context.DeadlineExceeded), "a push was decoded with the budget taken: %v", err)
	m.pushes.Release(pushBudget)
	r := do(t, "POST", c.url(l, wire.PathExecutorUpdate), body)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

// An executor's pushes are decoded one at a time: with e1's lock held, its
// push waits while e2's goes through.
func TestAnExecutorsPushesGoOneAtATime(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	m := c.masters[l]
	push := func(executor string, wait time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "POST", c.url(l, wire.PathExecutorUpdate),
			bytes.NewReader([]byte(`{"version":3,"executor":"`+executor+`","partial":true,"executions":[]}`)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	lock := m.pushLock("e1")
	require.NoError(t, lock.Acquire(context.Background(), 1))
	require.ErrorIs(t, push("e1", 500*time.Millisecond), context.DeadlineExceeded, "e1's push went through beside one of its own")
	require.NoError(t, push("e2", 10*time.Second))
	lock.Release(1)
	require.NoError(t, push("e1", 10*time.Second))
}

// The job list's answer grows with the jobs kept: a list of many takes its
// share of the read budget while it is made, as a big job's answer does.
func TestAJobListOfManyTakesItsShareOfTheBudget(t *testing.T) {
	m := &Master{fsm: fsm.New(), bigReads: semaphore.NewWeighted(readBudget), bigReadWrite: time.Minute}
	m.fsm.Apply(&raft.Log{Index: 1, Data: fsm.MustEncode(&fsm.EstablishLeadership{Node: "m1"})})
	spec, err := jobspec.Parse([]byte(`{"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`))
	require.NoError(t, err)
	const jobs = 8000 // 2,000 units: more than a small read
	for i := range jobs {
		m.fsm.Apply(&raft.Log{Index: uint64(2 + i), Data: fsm.MustEncode(&fsm.SubmitJob{Fenced: fsm.Fenced{Token: 1}, ID: fmt.Sprintf("j%d", i), Spec: spec})})
	}
	held := make(chan bool, 1)
	h := m.listRead(func(w http.ResponseWriter, r *http.Request) {
		held <- !m.bigReads.TryAcquire(readBudget - jobs/jobsPerReadUnit + 1)
	})
	h(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/jobs", nil))
	require.True(t, <-held, "the list held no share of the budget while it was made")
	require.True(t, m.bigReads.TryAcquire(readBudget), "the list gave its share back")
}
