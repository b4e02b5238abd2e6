package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
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
// current attempt of one subtask, as LogsOf does. The caller reads the logs
// from the returned ReadCloser and must close it.
func (c *Client) Logs(ctx context.Context, jobID, vertex string, subtask int, stream string) (io.ReadCloser, error) {
	l, err := c.LogsOf(ctx, jobID, vertex, subtask, LogOptions{Stream: stream})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// LogOptions says which log of a subtask to read, and how.
type LogOptions struct {
	// Stream is Stdout or Stderr.
	Stream string
	// Follow reads on as the task writes, until it has ended; the reader
	// then returns io.EOF, or ErrLogCut if the connection broke first.
	Follow bool
	// Attempt, when not nil, is the attempt whose log to read (default:
	// the current one). The attempt before the current one is asked
	// first of the executor the job's answer says it ran on
	// (previous_attempt.executor); an older attempt's executor is not in
	// the job's state: the executor of the current attempt is asked
	// first, then every other one the cluster lists, until one has the
	// log. A job id used again goes on from the attempt numbers of the job
	// before it: an attempt below this job's first may be that job's.
	Attempt *int
	// ViaMasters reads the log through the masters only (GET
	// /v1/jobs/{id}/logs), asking no executor: for a client that cannot
	// reach the executors. The masters relay the log of the current attempt
	// and of the one before it, no older one; at most the last api.LogTailMax
	// bytes of what the log holds when the read starts (Log.MayLackStart),
	// and only to a submit or management token.
	ViaMasters bool
}

// ErrLogCut is the error of a followed log whose connection broke before
// its task ended.
var ErrLogCut = errors.New("the log's stream broke before the task ended")

// Log is a task's log being read, from its executor or relayed by a
// master: read it, then close it.
type Log struct {
	io.ReadCloser
	// ExecutionID is the execution whose log it is.
	ExecutionID string
	// Executor is the executor the log comes from ("" when a master
	// relaying it did not say).
	Executor string
	// Master is the base URL of the master that relays the log, "" when
	// it is read from its executor.
	Master string
	// ExecutorErr is why the log is relayed by a master rather than read
	// from its executor, which was asked first (nil when it was not).
	ExecutorErr error
	// MayLackStart is true for a log read at once through a master whose
	// answer is api.LogTailMax bytes long, the most a master relays: the
	// log may begin earlier, and its whole is on its executor.
	MayLackStart bool
}

// LogsOf streams one log of a subtask: it finds the attempt's execution
// with Job, the executor's HTTP address with Cluster, and reads the
// executor's log endpoint.
//
// When that executor cannot be reached, or refuses this client (a
// transport or TLS failure, no answer in time, 401, 403 or a 5xx: the
// executors are on a network this client does not reach, or want a client
// certificate it does not hold), the log of the current attempt, or of the
// one before it whose executor the job's answer names, is read through the
// masters instead (GET /v1/jobs/{id}/logs); the Log then says so (Master,
// ExecutorErr). An executor's answer that it has no such log (404) is not
// a reason to: the masters would get the same. When the masters fail too,
// the error is a *LogReadError naming both failures.
//
// The call's timeout bounds everything up to the executor's answer, and
// then, when the masters are asked, up to theirs; reading the logs is
// bounded only by ctx.
func (c *Client) LogsOf(ctx context.Context, jobID, vertex string, subtask int, o LogOptions) (*Log, error) {
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
		return c.earlierAttemptLogs(ctx, job, vertex, st, *o.Attempt, o)
	}
	if st.ExecutionID == "" || st.Executor == "" {
		return nil, fmt.Errorf("subtask %s[%d] of job %q has not run yet (state %s): no logs", vertex, subtask, jobID, st.State)
	}
	q := logRead{job: jobID, execution: st.ExecutionID, stream: stream, follow: o.Follow}
	if o.ViaMasters {
		return c.masterLogs(ctx, q)
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
	l, err := c.executorLogs(ctx, exec, base, q)
	if err != nil && ctx.Err() == nil && relayable(err) {
		return c.relayedLogs(ctx, q, err)
	}
	return l, err
}

// logRead is one log a client reads: the execution's, of job.
type logRead struct {
	job, execution, stream string
	follow                 bool
}

// earlierAttemptLogs reads the log of an earlier attempt of subtask st
// (ViaMasters: through the masters only). The attempt before the current
// one is asked first of the executor the state says it ran on, and read
// through the masters when that executor cannot be reached (relayable);
// then, as an older attempt's, from the executor of the current attempt if
// it has it, else from the first other executor that does.
func (c *Client) earlierAttemptLogs(ctx context.Context, job *api.Job, vertex string, st *api.Subtask, attempt int, o LogOptions) (*Log, error) {
	if attempt < 0 || attempt > st.Attempt {
		return nil, fmt.Errorf("subtask %s[%d] of job %q is at attempt %d: no attempt %d", vertex, st.Index, job.ID, st.Attempt, attempt)
	}
	q := logRead{job: job.ID, execution: wire.ExecutionID(job.ID, vertex, st.Index, attempt), stream: o.Stream, follow: o.Follow}
	if o.ViaMasters {
		return c.masterLogs(ctx, q)
	}
	ranOn := "" // where the state says the attempt ran
	if p := st.PreviousAttempt; p != nil && p.Attempt == attempt {
		ranOn = p.Executor
	}
	cluster, err := c.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	order := make([]*api.Executor, 0, len(cluster.Executors))
	for _, id := range []string{ranOn, st.Executor} {
		if x := findExecutor(cluster, id); x != nil && !slices.Contains(order, x) {
			order = append(order, x)
		}
	}
	for i := range cluster.Executors {
		if x := &cluster.Executors[i]; !slices.Contains(order, x) {
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
		logs, err := c.executorLogs(ctx, x, base, q)
		if err == nil {
			return logs, nil
		}
		if ranOn != "" && x.ID == ranOn && ctx.Err() == nil && relayable(err) {
			return c.relayedLogs(ctx, q, err)
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
	if len(unreachable) > 0 {
		// Those not asked come first: one of them may well have the log
		// (an executor that refuses this client answers every read so).
		return nil, fmt.Errorf("the logs of %s (attempt %d of %s[%d]) are on no executor that answered, and %d could not be asked: %s; one of those may have them (with TLS, reading an executor takes a client certificate: --client-cert), or the one that ran it deleted them (--gc-retention) or is gone",
			q.execution, attempt, vertex, st.Index, len(unreachable), strings.Join(unreachable, ", "))
	}
	return nil, fmt.Errorf("no executor has the logs of %s (attempt %d of %s[%d]): the one that ran it deleted them (--gc-retention) or is gone", q.execution, attempt, vertex, st.Index)
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
func (c *Client) executorLogs(ctx context.Context, exec *api.Executor, base string, q logRead) (*Log, error) {
	ctx, cancel := context.WithCancel(ctx)
	var timer *time.Timer
	if c.timeout > 0 {
		timer = time.AfterFunc(c.timeout, cancel)
	}
	v := url.Values{"id": {q.execution}, "stream": {q.stream}}
	if q.follow {
		v.Set("follow", "1")
	}
	path := wire.PathLogs + "?" + v.Encode()
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
		return nil, fmt.Errorf("cannot reach executor %q at %s (status %s) for the logs of %s: %w", exec.ID, displayAddr(base), exec.Status, q.execution, shortError{err})
	}
	if hres.StatusCode != http.StatusOK {
		defer cancel()
		return nil, fmt.Errorf("executor %q, logs of %s: %w", exec.ID, q.execution, logAnswerError(hres, path))
	}
	return &Log{ReadCloser: logBody(hres, q.follow, cancel), ExecutionID: q.execution, Executor: exec.ID}, nil
}

// logAnswerError is the *APIError of a log read's answer that is not the
// log (GET path): its status and the message of its body (64 KiB at most),
// which it closes.
func logAnswerError(hres *http.Response, path string) *APIError {
	defer hres.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(hres.Body, 64<<10))
	return &APIError{StatusCode: hres.StatusCode, Message: transport.ErrorMessage(body), Method: http.MethodGet, Path: path}
}

// logBody is the reader of a log's answer, which cancel releases once
// closed: a followed log's tells its end from a broken connection.
func logBody(hres *http.Response, follow bool, cancel context.CancelFunc) io.ReadCloser {
	if follow {
		return &cancelOnClose{ReadCloser: &followedLog{resp: hres}, cancel: cancel}
	}
	return &cancelOnClose{ReadCloser: hres.Body, cancel: cancel}
}

// relayable reports whether an executor's failure to give a log is one
// that a master may get past, reaching the executor from where it is: no
// answer (refused, unroutable, a TLS handshake that failed, none in time),
// a refusal of this client (401, 403: the executor wants a certificate of
// the cluster) or a failure of the executor (5xx). Any other answer (404:
// it has no such log) is the executor's word, which a master would get
// too.
func relayable(err error) bool {
	apiErr, ok := errors.AsType[*APIError](err)
	if !ok {
		return true
	}
	switch code := apiErr.StatusCode; {
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		return true
	case code >= 500:
		return true
	}
	return false
}

// followedLog reads a followed log and tells its end from a broken
// connection by the trailer the executor (or a master relaying it) sends
// once the task has ended.
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
