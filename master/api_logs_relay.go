package master

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"jobmaster/api"
	"jobmaster/strictjson"
	"jobmaster/transport"
	"jobmaster/wire"
)

// The I/O of a log read through a master (api_logs.go): askLog asks the
// executor, relayLog copies its answer to the caller, within logLimits.

// logLimits are the bounds of the log reads a master relays; tests shorten
// the durations.
type logLimits struct {
	// write bounds each write to the caller (logWriteTimeout).
	write time.Duration
	// atOnce bounds a whole read at once (logAtOnceTimeout).
	atOnce time.Duration
	// tokenCheck is how often a followed log checks its caller's token
	// (logTokenCheck).
	tokenCheck time.Duration
}

// defaultLogLimits are a master's logLimits.
func defaultLogLimits() logLimits {
	return logLimits{write: logWriteTimeout, atOnce: logAtOnceTimeout, tokenCheck: logTokenCheck}
}

// logAnswer is an executor's 200 to a log read, with what releases it and,
// for a read at once, the deadline of the whole read.
type logAnswer struct {
	resp     *http.Response
	cancel   context.CancelFunc
	deadline time.Time
}

// askLog asks the executor t for q's log. Its answer's headers must come
// within logAnswerTimeout; its body is then read under ctx alone, and, for
// a read at once, within limits.atOnce of the ask. It returns the answer
// of a 200 (at once, one whose length is said, within q.tail), else how t
// answered.
func (m *Master) askLog(ctx context.Context, t logTarget, q logQuery) (*logAnswer, logAsked) {
	a := logAsked{target: t}
	v := url.Values{"id": {q.execution}, "stream": {q.stream}, "tail": {strconv.FormatInt(q.tail, 10)}}
	if q.follow {
		v.Set("follow", "1")
	}
	u, err := transport.PeerURL(m.client, t.addr, wire.PathLogs+"?"+v.Encode())
	if err != nil {
		a.err = fmt.Errorf("its address: %w", err)
		return nil, a
	}
	var deadline time.Time
	var cancel context.CancelFunc
	if q.follow {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		deadline = time.Now().Add(m.logLimits.atOnce)
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	timer := time.AfterFunc(logAnswerTimeout, cancel)
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		timer.Stop()
		cancel()
		a.err = err
		return nil, a
	}
	resp, err := doExecutor(m.client, hr, t.id)
	if !timer.Stop() {
		// The timer cancelled the request, also if its answer came just
		// before: its body can no longer be read.
		if err == nil {
			_ = resp.Body.Close()
		}
		err = fmt.Errorf("no answer within %v", logAnswerTimeout)
	}
	if err == nil && resp.Header.Get(transport.RoleHeader) != transport.RoleExecutor {
		_ = resp.Body.Close()
		err = fmt.Errorf("what answers at %s is no executor", t.addr)
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err // the URL is the executor's, named already
	}
	if err != nil {
		cancel()
		a.err = err
		return nil, a
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		cancel()
		a.status, a.msg = resp.StatusCode, strictjson.Short(transport.ErrorMessage(body))
		return nil, a
	}
	if n := resp.ContentLength; !q.follow && (n < 0 || n > q.tail) {
		// Relayed, an answer without its length could be cut and read
		// as whole; one past the tail would be cut here and read as
		// whole too.
		_ = resp.Body.Close()
		cancel()
		a.status, a.length = resp.StatusCode, n
		return nil, a
	}
	return &logAnswer{resp: resp, cancel: cancel, deadline: deadline}, a
}

// relayLog copies an executor's answer to the caller: at most q.tail
// bytes of a log read at once, by the answer's deadline; a followed log as
// it comes, until the executor's answer ends, each write within
// limits.write. An answer that breaks off breaks the caller's off too
// (http.ErrAbortHandler), but for the caller's own going. A followed log
// is cut when this master stops or allowed (the caller's token still
// allows the read) says no, a write the caller holds up included.
func (m *Master) relayLog(w http.ResponseWriter, r *http.Request, t logTarget, q logQuery, ans *logAnswer, allowed func() bool) {
	defer ans.cancel()
	defer ans.resp.Body.Close()
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set(api.LogExecutorHeader, t.id)
	if q.follow {
		h.Set("Trailer", wire.HeaderEnd)
		h.Set("X-Accel-Buffering", "no") // proxies must not hold the log back
	} else {
		h.Set("Content-Length", strconv.FormatInt(ans.resp.ContentLength, 10)) // within q.tail: askLog
	}
	rc := http.NewResponseController(w)
	if !q.follow {
		// The whole answer by the read's deadline, whatever the executor
		// or the caller does.
		_ = rc.SetWriteDeadline(ans.deadline)
	} else {
		_ = rc.SetWriteDeadline(time.Now().Add(m.logLimits.write))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if !q.follow {
		if _, err := io.Copy(w, io.LimitReader(ans.resp.Body, q.tail)); err != nil && r.Context().Err() == nil {
			panic(http.ErrAbortHandler)
		}
		return
	}
	// The headers now, not with the task's first bytes: a task may write
	// nothing for long (not started yet, quiet, or of the sim runtime),
	// and a reader waiting for them would give up.
	if rc.Flush() != nil {
		return
	}
	// The follow ends, broken off, when this master stops or the caller's
	// token is deleted: the executor's answer is cancelled, and a write
	// the caller holds up returns at once.
	cut := &relayCut{rc: rc}
	done := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		tick := time.NewTicker(m.logLimits.tokenCheck)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-m.stop:
			case <-tick.C:
				if allowed() {
					continue
				}
			}
			ans.cancel()
			cut.now()
			return
		}
	})
	defer watch.Wait() // no deadline is set once the handler has returned
	defer close(done)
	buf := make([]byte, 32<<10)
	for {
		n, err := ans.resp.Body.Read(buf)
		if n > 0 {
			if !cut.extend(time.Now().Add(m.logLimits.write)) {
				panic(http.ErrAbortHandler)
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return // the caller went, or held a write up too long
			}
			if rc.Flush() != nil {
				return
			}
		}
		if errors.Is(err, io.EOF) && ans.resp.Trailer.Get(wire.HeaderEnd) == wire.EndComplete {
			h.Set(wire.HeaderEnd, wire.EndComplete)
			return
		}
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			panic(http.ErrAbortHandler) // cut short: the caller must not take it as whole
		}
	}
}

// relayCut is the write deadline of a followed log's relay, which both
// the relay (before each write) and its watch (to cut it) set.
type relayCut struct {
	rc  *http.ResponseController
	mu  sync.Mutex
	cut bool
}

// extend sets the deadline of the next write; false once the relay is cut.
func (c *relayCut) extend(deadline time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return false
	}
	_ = c.rc.SetWriteDeadline(deadline)
	return true
}

// now cuts the relay: a write under way, or the next, returns at once.
func (c *relayCut) now() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	_ = c.rc.SetWriteDeadline(time.Now())
}
