package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/wire"
)

// logRead is a log read through a master, GET /v1/jobs/{job}/logs, with
// the token secret: its status, its body so far (read as it comes) and,
// once done is closed, how the answer ended (err nil: cleanly) and its
// trailer.
type logRead struct {
	status  int
	header  http.Header
	mu      sync.Mutex
	body    strings.Builder
	done    chan struct{}
	err     error
	trailer http.Header
}

func (r *logRead) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.String()
}

// readLogVia starts a log read of execution through the master at addr.
func (c *Cluster) readLogVia(t *testing.T, ctx context.Context, addr, secret, execution string, extra url.Values) *logRead {
	t.Helper()
	job, _, _ := strings.Cut(execution, "/")
	q := url.Values{"execution": {execution}}
	for k, v := range extra {
		q[k] = v
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(addr, "/v1/jobs/"+job+"/logs?"+q.Encode()), nil)
	require.NoError(t, err)
	req.Header.Set(api.TokenHeader, secret)
	hc := *c.HTTP
	hc.Timeout = 0 // a followed log lasts as long as its task
	resp, err := hc.Do(req)
	require.NoError(t, err)
	r := &logRead{status: resp.StatusCode, header: resp.Header, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer resp.Body.Close()
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			r.mu.Lock()
			r.body.Write(buf[:n])
			r.mu.Unlock()
			if errors.Is(err, io.EOF) {
				r.trailer = resp.Trailer
				return
			}
			if err != nil {
				r.err = err
				return
			}
		}
	}()
	return r
}

// wait waits for the read to end.
func (r *logRead) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		t.Fatalf("the log read did not end within %v; it holds:\n%s", timeout, r.text())
	}
}

// TestLogsThroughAFollower: with TLS and ACLs on, a task's log is read
// through a master that does not lead, which relays it from the executor:
// at once (stdout and stderr), and followed as the task writes until it
// ends (the trailer says so). A read token may not; an attempt not made is
// a 404; the attempt before the current one is read from the executor it
// ran on, an older one is a 404 saying where to read it; and with the
// executor killed, a followed log breaks off rather than end as whole, and
// a read is a 502 naming the executor.
func TestLogsThroughAFollower(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{ACL: true, TLS: true})
	submit, read := c.Token("submit", "ci"), c.Token("read", "dashboard")
	leader := c.Leader()
	var via string
	for _, m := range c.Masters {
		if m.ID != leader.ID {
			via = m.HTTPAddr
			break
		}
	}
	ctx := c.ctx()
	gate := filepath.Join(t.TempDir(), "go")
	c.Submit("lg", fmt.Sprintf(`{"name": "lg", "vertices": [{"id": "v", "parallelism": 1, "command": ["sh", "-c", %q]}]}`,
		"echo first line; echo to stderr >&2; "+awaitFile(gate)+"echo written later"))

	var r *logRead
	WaitFor(t, "the first line, read through a follower", 30*time.Second, func() bool {
		r = c.readLogVia(t, ctx, via, submit, "lg/v/0/0", nil)
		r.wait(t, 20*time.Second)
		return r.status == http.StatusOK && r.text() == "first line\n"
	})
	require.NoError(t, r.err)
	require.Equal(t, "text/plain; charset=utf-8", r.header.Get("Content-Type"))
	require.Equal(t, c.Job("lg").Vertices[0].Subtasks[0].Executor, r.header.Get(api.LogExecutorHeader))

	r = c.readLogVia(t, ctx, via, submit, "lg/v/0/0", url.Values{"stream": {"stderr"}})
	r.wait(t, 20*time.Second)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "to stderr\n", r.text())

	r = c.readLogVia(t, ctx, via, read, "lg/v/0/0", nil)
	r.wait(t, 20*time.Second)
	require.Equal(t, http.StatusForbidden, r.status)
	require.Contains(t, r.text(), "it needs a submit or management token")

	r = c.readLogVia(t, ctx, via, submit, "lg/v/0/1", nil)
	r.wait(t, 20*time.Second)
	require.Equal(t, http.StatusNotFound, r.status, r.text())
	require.Contains(t, r.text(), "is at attempt 0")

	// Followed: what is there, then what the task writes, to its end.
	f := c.readLogVia(t, ctx, via, submit, "lg/v/0/0", url.Values{"follow": {"1"}})
	require.Equal(t, http.StatusOK, f.status)
	WaitFor(t, "the first line, followed", 20*time.Second, func() bool { return f.text() == "first line\n" })
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	f.wait(t, 30*time.Second)
	require.NoError(t, f.err)
	require.Equal(t, "first line\nwritten later\n", f.text())
	require.Equal(t, wire.EndComplete, f.trailer.Get(wire.HeaderEnd))
	c.WaitJob("lg", 30*time.Second, "FINISHED")

	// Earlier attempts: the one before the current one is read from the
	// executor it ran on, which the state records; an older one is the
	// executors' to give (jobmaster job logs --attempt), not the masters'.
	c.thirdAttempt(t, "lg-again")
	WaitFor(t, "attempt 1's log, read through a follower", 30*time.Second, func() bool {
		r = c.readLogVia(t, ctx, via, submit, "lg-again/v/0/1", nil)
		r.wait(t, 20*time.Second)
		return r.status == http.StatusOK
	})
	require.Equal(t, "attempt 1\n", r.text())
	r = c.readLogVia(t, ctx, via, submit, "lg-again/v/0/0", nil)
	r.wait(t, 20*time.Second)
	require.Equal(t, http.StatusNotFound, r.status, r.text())
	require.Contains(t, r.text(), "the masters know only where the attempt before the current one ran; read older ones from the executors: jobmaster job logs lg-again v 0 --attempt 0")

	// The executor killed under a followed log: the answer breaks off.
	c.Submit("lg-cut", `{"name": "lg-cut", "vertices": [{"id": "v", "parallelism": 1, "command": ["sh", "-c", "echo before; sleep 600"]}]}`)
	var ex string
	WaitFor(t, "lg-cut to run", 30*time.Second, func() bool {
		s := c.Job("lg-cut").Vertices[0].Subtasks[0]
		ex = s.Executor
		return s.State == wire.StateRunning
	})
	WaitFor(t, "lg-cut's line, followed", 30*time.Second, func() bool {
		f = c.readLogVia(t, ctx, via, submit, "lg-cut/v/0/0", url.Values{"follow": {"1"}})
		if f.status != http.StatusOK {
			f.wait(t, 20*time.Second)
			return false
		}
		WaitFor(t, "the line", 20*time.Second, func() bool { return f.text() == "before\n" })
		return true
	})
	c.Node(ex).Kill()
	f.wait(t, 30*time.Second)
	require.Error(t, f.err, "a followed log whose executor died must not read as complete")
	require.Empty(t, f.trailer.Get(wire.HeaderEnd))
	r = c.readLogVia(t, ctx, via, submit, "lg-cut/v/0/0", nil)
	r.wait(t, 20*time.Second)
	require.Equal(t, http.StatusBadGateway, r.status, r.text())
	require.Contains(t, r.text(), "executor "+ex+" at ")
}

// thirdAttempt runs job id, a subtask that prints its attempt and fails
// until its third, to the end, and checks that the job's answer names the
// executor its previous attempt ran on.
func (c *Cluster) thirdAttempt(t *testing.T, id string) {
	t.Helper()
	c.Submit(id, `{"name": "`+id+`", "vertices": [{"id": "v", "parallelism": 1,
		"command": ["sh", "-c", "echo attempt $JOBMASTER_ATTEMPT; [ $JOBMASTER_ATTEMPT -ge 2 ]"]}],
		"restart": {"strategy": "fixed-delay", "delay": "100ms", "attempts": 3}}`)
	c.WaitJob(id, 60*time.Second, "FINISHED")
	st := c.Job(id).Vertices[0].Subtasks[0]
	require.Equal(t, 2, st.Attempt)
	require.NotNil(t, st.PreviousAttempt)
	require.NotEmpty(t, st.PreviousAttempt.Executor, "the job's answer names where the previous attempt ran")
}
