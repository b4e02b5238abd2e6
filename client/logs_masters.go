package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"jobmaster/api"
	"jobmaster/transport"
)

// A task's log read through the masters: GET /v1/jobs/{id}/logs, which any
// master serves from its own state by relaying the executor's answer
// (docs/api.md). It serves the current attempt's log and the one before
// it, at most their last api.LogTailMax bytes, to a submit or management
// token. A followed answer ends cleanly, with the trailer
// X-Jobmaster-End: complete, only when the log is complete; a cut one is
// broken off, which the reader returns as ErrLogCut.

// LogReadError is the error of a log that neither its executor nor the
// masters gave: the executor could not be reached or refused this client,
// and the masters could not relay the log either.
type LogReadError struct {
	// Executor is the failure of the executor, asked first.
	Executor error
	// Masters is the failure of the read through the masters.
	Masters error
}

func (e *LogReadError) Error() string {
	return e.Executor.Error() + "; nor could the masters relay it: " + e.Masters.Error()
}

// Unwrap returns both failures, the executor's first.
func (e *LogReadError) Unwrap() []error { return []error{e.Executor, e.Masters} }

// relayedLogs reads q's log through the masters after its executor failed
// with execErr.
func (c *Client) relayedLogs(ctx context.Context, q logRead, execErr error) (*Log, error) {
	l, err := c.masterLogs(ctx, q)
	if err != nil {
		return nil, &LogReadError{Executor: execErr, Masters: err}
	}
	l.ExecutorErr = execErr
	return l, nil
}

// masterLogs reads q's log through the masters, in one round over them
// from the one that answered last: a master that cannot be reached, does
// not answer in the attempt timeout, is busy (429, 503) or did not reach
// the executor (502, 504) is followed by the next, which may; any other
// answer is final (401, 403: the token's; 404, 409: the state's). Each
// master's headers must come within the attempt timeout, all of them
// within the call's; the body is then read under ctx alone. When every
// master failed, the error is the answer of the first one that gave one,
// else an *UnreachableError.
func (c *Client) masterLogs(ctx context.Context, q logRead) (*Log, error) {
	v := url.Values{"execution": {q.execution}, "stream": {q.stream}, "tail": {strconv.Itoa(api.LogTailMax)}}
	if q.follow {
		v.Set("follow", "1")
	}
	path := jobPath(q.job) + "/logs?" + v.Encode()
	var deadline time.Time
	if c.timeout > 0 {
		deadline = time.Now().Add(c.timeout)
	}
	n := len(c.addrs)
	last := make([]error, n)
	var answer error // the first master's answer that is not a log
	start := c.first()
	for k := range n {
		i := (start + k) % n
		wait := c.attemptTimeout
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			if wait <= 0 || left < wait {
				wait = left
			}
		}
		l, leader, err := c.masterLog(ctx, c.addrs[i], path, q, wait)
		if err == nil {
			c.answered(i, leader)
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("GET %s: %w", path, ctx.Err())
		}
		last[i] = err
		apiErr, ok := errors.AsType[*APIError](err)
		if !ok {
			continue
		}
		switch apiErr.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			if answer == nil {
				answer = fmt.Errorf("master %s: %w", displayAddr(c.addrs[i]), apiErr)
			}
			continue
		}
		c.answered(i, leader)
		return nil, err
	}
	if answer != nil {
		return nil, answer
	}
	return nil, unreachable(c.addrs, last)
}

// masterLog asks the master at base for a log (path): its answer's
// headers must come within wait (none: 0). It returns the log and the
// leader the master named, or why there is none.
func (c *Client) masterLog(ctx context.Context, base, path string, q logRead, wait time.Duration) (*Log, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, transport.URL(c.http, base, path), nil)
	if err != nil {
		cancel()
		return nil, "", err
	}
	hreq.Header.Set("Accept", "text/plain")
	if c.token != "" {
		hreq.Header.Set(transport.TokenHeader, c.token)
	}
	var timer *time.Timer
	if wait > 0 {
		timer = time.AfterFunc(wait, cancel)
	}
	hres, err := c.http.Do(hreq)
	if timer != nil && !timer.Stop() {
		// The timer cancelled the request, also if its answer came just
		// before: its body can no longer be read.
		if err == nil {
			_ = hres.Body.Close()
		}
		err = fmt.Errorf("no answer within %v: %w", wait, context.DeadlineExceeded)
	}
	if err != nil {
		cancel()
		return nil, "", shortError{err}
	}
	if role := hres.Header.Get(transport.RoleHeader); role != "" && role != transport.RoleMaster {
		_ = hres.Body.Close()
		cancel()
		return nil, "", &NotMasterError{Address: base, Role: role}
	}
	leader := hres.Header.Get(api.LeaderHeader)
	if hres.StatusCode != http.StatusOK {
		defer cancel()
		return nil, leader, logAnswerError(hres, path)
	}
	return &Log{
		ReadCloser:   logBody(hres, q.follow, cancel),
		ExecutionID:  q.execution,
		Executor:     hres.Header.Get(api.LogExecutorHeader),
		Master:       base,
		MayLackStart: !q.follow && hres.ContentLength >= api.LogTailMax,
	}, leader, nil
}
