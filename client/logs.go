package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"jobmaster/api"
	"jobmaster/transport"
	"jobmaster/wire"
)

// Log streams of a task.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Logs streams the stdout or stderr (stream is Stdout or Stderr) of the
// current attempt of one subtask: it finds the attempt's execution with Job,
// the executor's HTTP address with Cluster, and reads the executor's log
// endpoint. The caller reads the logs from the returned ReadCloser and must
// close it. The call's timeout bounds everything up to the executor's answer;
// reading the logs is bounded only by ctx.
func (c *Client) Logs(ctx context.Context, jobID, vertex string, subtask int, stream string) (io.ReadCloser, error) {
	return c.LogsOf(ctx, jobID, vertex, subtask, LogOptions{Stream: stream})
}

// LogOptions says which log of a subtask to read, and how.
type LogOptions struct {
	// Stream is Stdout or Stderr.
	Stream string
	// Follow reads on as the task writes, until it has ended; the reader
	// then returns io.EOF, or ErrLogCut if the connection broke first.
	Follow bool
	// Attempt, when not nil, is the attempt whose log to read (default:
	// the current one). An earlier attempt's executor is not in the job's
	// state: the executor of the current attempt is asked first, then
	// every other one the cluster lists, until one has the log. A job id
	// used again goes on from the attempt numbers of the job before it: an
	// attempt below this job's first may be that job's.
	Attempt *int
}

// ErrLogCut is the error of a followed log whose connection broke before
// its task ended.
var ErrLogCut = errors.New("the log's stream broke before the task ended")

// LogsOf is Logs with options.
func (c *Client) LogsOf(ctx context.Context, jobID, vertex string, subtask int, o LogOptions) (io.ReadCloser, error) {
	stream := o.Stream
	if stream != Stdout && stream != Stderr {
		return nil, fmt.Errorf("invalid log stream %q: use %s or %s", stream, Stdout, Stderr)
	}
	job, err := c.Job(ctx, jobID)
	if err != nil {
		return nil, err
	}
	st, err := FindSubtask(job, vertex, subtask)
	if err != nil {
		return nil, err
	}
	if o.Attempt != nil && *o.Attempt != st.Attempt {
		return c.earlierAttemptLogs(ctx, job, vertex, st, *o.Attempt, stream, o.Follow)
	}
	if st.ExecutionID == "" || st.Executor == "" {
		return nil, fmt.Errorf("subtask %s[%d] of job %q has not run yet (state %s): no logs", vertex, subtask, jobID, st.State)
	}
	cluster, err := c.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	exec := findExecutor(cluster, st.Executor)
	if exec == nil || exec.HTTPAddr == "" {
		return nil, fmt.Errorf("executor %q, which ran execution %s, is not known to the cluster: its logs are unavailable", st.Executor, st.ExecutionID)
	}
	// The executor is reached as the master that answered last was.
	base, err := executorBase(exec.HTTPAddr, schemeOf(c.addrs[c.first()]))
	if err != nil {
		return nil, fmt.Errorf("executor %q advertises a bad HTTP address: %w", exec.ID, err)
	}
	return c.executorLogs(ctx, exec, base, st.ExecutionID, stream, o.Follow)
}

// earlierAttemptLogs reads the log of an earlier attempt of subtask st:
// from the executor of the current attempt if it has it, else from the
// first other executor that does.
func (c *Client) earlierAttemptLogs(ctx context.Context, job *api.Job, vertex string, st *api.Subtask, attempt int, stream string, follow bool) (io.ReadCloser, error) {
	if attempt < 0 || attempt > st.Attempt {
		return nil, fmt.Errorf("subtask %s[%d] of job %q is at attempt %d: no attempt %d", vertex, st.Index, job.ID, st.Attempt, attempt)
	}
	id := wire.ExecutionID(job.ID, vertex, st.Index, attempt)
	cluster, err := c.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	order := make([]*api.Executor, 0, len(cluster.Executors))
	if x := findExecutor(cluster, st.Executor); x != nil {
		order = append(order, x)
	}
	for i := range cluster.Executors {
		if x := &cluster.Executors[i]; x.ID != st.Executor {
			order = append(order, x)
		}
	}
	var unreachable []string
	for _, x := range order {
		if x.HTTPAddr == "" {
			continue
		}
		base, err := executorBase(x.HTTPAddr, schemeOf(c.addrs[c.first()]))
		if err != nil {
			continue
		}
		logs, err := c.executorLogs(ctx, x, base, id, stream, follow)
		if err == nil {
			return logs, nil
		}
		apiErr, ok := errors.AsType[*APIError](err)
		switch {
		case ok && apiErr.StatusCode == http.StatusNotFound:
			continue
		case ok:
			unreachable = append(unreachable, fmt.Sprintf("%s (HTTP %d: %s)", x.ID, apiErr.StatusCode, apiErr.Message))
		default:
			unreachable = append(unreachable, x.ID+" (no answer)")
		}
	}
	msg := fmt.Sprintf("no executor has the logs of %s (attempt %d of %s[%d]): the one that ran it deleted them (--gc-retention) or is gone", id, attempt, vertex, st.Index)
	if len(unreachable) > 0 {
		msg += "; not asked successfully: " + strings.Join(unreachable, ", ")
	}
	return nil, errors.New(msg)
}

// FindSubtask returns the subtask with the given index of a job's vertex, or
// an error naming what exists.
func FindSubtask(job *api.Job, vertex string, subtask int) (*api.Subtask, error) {
	var ids []string
	for _, v := range job.Vertices {
		ids = append(ids, v.ID)
		if v.ID != vertex {
			continue
		}
		for i := range v.Subtasks {
			if v.Subtasks[i].Index == subtask {
				return &v.Subtasks[i], nil
			}
		}
		return nil, fmt.Errorf("vertex %q of job %q has no subtask %d (it has subtasks 0 to %d)", vertex, job.ID, subtask, len(v.Subtasks)-1)
	}
	return nil, fmt.Errorf("job %q has no vertex %q (its vertices: %s)", job.ID, vertex, strings.Join(ids, ", "))
}

// findExecutor returns the executor with the given id, or nil.
func findExecutor(cluster *api.Cluster, id string) *api.Executor {
	for i := range cluster.Executors {
		if cluster.Executors[i].ID == id {
			return &cluster.Executors[i]
		}
	}
	return nil
}

// executorLogs sends the log request to one executor. The headers must come
// within the call's timeout; the body is then read under ctx alone.
func (c *Client) executorLogs(ctx context.Context, exec *api.Executor, base, executionID, stream string, follow bool) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	var timer *time.Timer
	if c.timeout > 0 {
		timer = time.AfterFunc(c.timeout, cancel)
	}
	q := url.Values{"id": {executionID}, "stream": {stream}}
	if follow {
		q.Set("follow", "1")
	}
	path := wire.PathLogs + "?" + q.Encode()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, transport.URL(c.http, base, path), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	hres, err := c.http.Do(hreq)
	timedOut := timer != nil && !timer.Stop()
	if err != nil {
		cancel()
		if timedOut && ctx.Err() != nil {
			err = fmt.Errorf("no answer within %v: %w", c.timeout, context.DeadlineExceeded)
		}
		return nil, fmt.Errorf("cannot reach executor %q at %s (status %s) for the logs of %s: %w", exec.ID, displayAddr(base), exec.Status, executionID, shortError{err})
	}
	if hres.StatusCode != http.StatusOK {
		defer cancel()
		defer hres.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(hres.Body, 64<<10))
		apiErr := &APIError{StatusCode: hres.StatusCode, Message: transport.ErrorMessage(body), Method: http.MethodGet, Path: path}
		return nil, fmt.Errorf("executor %q, logs of %s: %w", exec.ID, executionID, apiErr)
	}
	if follow {
		return &cancelOnClose{ReadCloser: &followedLog{resp: hres}, cancel: cancel}, nil
	}
	return &cancelOnClose{ReadCloser: hres.Body, cancel: cancel}, nil
}

// followedLog reads a followed log and tells its end from a broken
// connection by the trailer the executor sends once the task has ended.
type followedLog struct{ resp *http.Response }

func (f *followedLog) Read(p []byte) (int, error) {
	n, err := f.resp.Body.Read(p)
	if errors.Is(err, io.EOF) && f.resp.Trailer.Get(wire.HeaderEnd) != wire.EndComplete {
		return n, ErrLogCut
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return n, fmt.Errorf("%w: %v", ErrLogCut, err)
	}
	return n, err
}

func (f *followedLog) Close() error { return f.resp.Body.Close() }

// cancelOnClose releases a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (r *cancelOnClose) Close() error {
	err := r.ReadCloser.Close()
	r.cancel()
	return err
}

// executorBase is the base URL of an executor at addr, as a master names
// it: a bare host:port, dialled with the scheme the masters are reached
// with, never one the address carries (a master of an earlier version
// passed on what gossip said).
func executorBase(addr, scheme string) (string, error) {
	if err := transport.CheckPeerAddress(addr); err != nil {
		return "", err
	}
	return scheme + "://" + addr, nil
}
