package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync/atomic"
	"time"

	"jobmaster/api"
	"jobmaster/transport"
)

// request is one call to the masters.
type request struct {
	method string
	path   string // with query, escaped
	body   []byte // nil: no body
	// contentType is the body's type; "" is JSON.
	contentType string
	// idempotent requests may be resent after they may have reached a
	// master; the others only when the connection was never set up.
	idempotent bool
	// unknownOn lists the failover statuses (502, 503, 504) after which a
	// request that is not idempotent may or may not have been carried out:
	// its error then wraps ErrOutcomeUnknown. Others are final answers.
	unknownOn []int
}

// response is a usable answer from one master.
type response struct {
	status int
	body   []byte
	from   string // base URL of the master
	role   string // the answer's transport.RoleHeader ("" from older masters)
	index  string // the answer's api.IndexHeader
	leader string // the answer's api.LeaderHeader
}

// failoverStatus reports whether an answer with this status means "this
// master cannot serve the request now, another one may": no leader (503) or
// a failed forward to the leader (502, 504).
func failoverStatus(code int) bool {
	return code == http.StatusServiceUnavailable || code == http.StatusBadGateway || code == http.StatusGatewayTimeout
}

// do sends req to the masters, starting with the one that last answered and
// failing over as the package doc describes. It returns the first usable
// answer (any status below 400, or a final error status as an *APIError).
func (c *Client) do(ctx context.Context, req request) (*response, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	n := len(c.addrs)
	last := make([]error, n) // last failure per master
	start := c.first()
	backoff := c.backoff
	var refusedSince time.Time // every round since refused at every master
	for {
		notMasters, untrusted := 0, 0
		for k := range n {
			i := (start + k) % n
			res, err := c.attempt(ctx, c.addrs[i], req)
			if err != nil && ctx.Err() != nil {
				return nil, c.stopped(ctx, req, last, i, err)
			}
			if err == nil && res.role != "" && res.role != transport.RoleMaster {
				// Not a master (an executor's address in the list): it
				// acted on nothing, so the next address is tried, whatever
				// the request.
				last[i] = &NotMasterError{Address: c.addrs[i], Role: res.role}
				notMasters++
				continue
			}
			if err == nil && !failoverStatus(res.status) {
				c.answered(i, res.leader)
				if res.status >= 400 {
					return nil, apiError(req, res)
				}
				return res, nil
			}
			if err == nil {
				err = apiError(req, res)
			}
			last[i] = err
			if TrustFailure(err) {
				untrusted++ // a handshake refused on a certificate sent nothing
				continue
			}
			if !req.idempotent && !sentNothing(err) {
				// Some failover statuses may come after the leader
				// carried the request out (it died before answering):
				// the outcome is then unknown, as for a lost answer.
				if apiErr, isAPI := errors.AsType[*APIError](err); isAPI && !slices.Contains(req.unknownOn, apiErr.StatusCode) {
					return nil, err
				}
				return nil, fmt.Errorf("%s %s at %s: %w (%w)", req.method, req.path, displayAddr(c.addrs[i]), ErrOutcomeUnknown, shortError{err})
			}
		}
		if notMasters+untrusted == n {
			// Waiting cannot make them masters, nor make their
			// certificates trusted.
			return nil, unreachable(c.addrs, last)
		}
		if untrusted > 0 && sharedTrustFailure(last) {
			// The masters that could be reached refused on the CA (they
			// share one), the others are out of reach: waiting for them
			// changes nothing.
			return nil, unreachable(c.addrs, last)
		}
		u := unreachable(c.addrs, last)
		switch {
		case !u.Refused():
			refusedSince = time.Time{}
		case refusedSince.IsZero():
			refusedSince = time.Now()
		case c.refusedFor > 0 && time.Since(refusedSince) >= c.refusedFor:
			return nil, u
		}
		if c.notify != nil {
			c.notify(u)
		}
		select {
		case <-ctx.Done():
			return nil, c.stopped(ctx, req, last, -1, nil)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// stopped builds the error of a call whose context ended while the master
// at index cur (or none, -1) was being tried with the result err.
func (c *Client) stopped(ctx context.Context, req request, last []error, cur int, err error) error {
	// An attempt cut short by the deadline says less than what the same
	// master said before.
	if cur >= 0 && err != nil && (last[cur] == nil || ctx.Err() == nil || !errors.Is(err, ctx.Err())) {
		last[cur] = err
	}
	if cur >= 0 && !req.idempotent && err != nil && !sentNothing(err) {
		return fmt.Errorf("%s %s at %s: %w (%w)", req.method, req.path, displayAddr(c.addrs[cur]), ErrOutcomeUnknown, shortError{err})
	}
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return fmt.Errorf("%s %s: %w", req.method, req.path, context.Canceled)
	}
	u := unreachable(c.addrs, last)
	if len(u.Attempts) == 0 {
		return fmt.Errorf("%s %s: %w", req.method, req.path, context.DeadlineExceeded)
	}
	return u
}

// unreachable collects the last failure of every master tried.
func unreachable(addrs []string, last []error) *UnreachableError {
	u := &UnreachableError{}
	for i, addr := range addrs {
		if last[i] != nil {
			u.Attempts = append(u.Attempts, Attempt{Address: addr, Err: last[i]})
		}
	}
	return u
}

// attempt sends req once to the master at base and reads its answer.
func (c *Client) attempt(ctx context.Context, base string, req request) (*response, error) {
	if req.idempotent && c.attemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.attemptTimeout)
		defer cancel()
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.method, transport.URL(c.http, base, req.path), body)
	if err != nil {
		return nil, err
	}
	if req.body != nil {
		ct := req.contentType
		if ct == "" {
			ct = transport.JSONType
		}
		hreq.Header.Set("Content-Type", ct)
	}
	hreq.Header.Set("Accept", "application/json")
	if c.token != "" {
		hreq.Header.Set(transport.TokenHeader, c.token)
	}
	// A request that never got a connection was never sent, whatever the
	// error (a deadline in the middle of dialing, say).
	var connected atomic.Bool
	hreq = hreq.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { connected.Store(true) },
	}))
	hres, err := c.http.Do(hreq)
	if err != nil {
		if !connected.Load() {
			return nil, notSent{err}
		}
		return nil, err
	}
	defer hres.Body.Close()
	data, err := io.ReadAll(hres.Body)
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	return &response{status: hres.StatusCode, body: data, from: base, role: hres.Header.Get(transport.RoleHeader),
		index: hres.Header.Get(api.IndexHeader), leader: hres.Header.Get(api.LeaderHeader)}, nil
}

// apiError turns an error answer into an *APIError.
func apiError(req request, res *response) *APIError {
	return &APIError{
		StatusCode: res.status,
		Message:    transport.ErrorMessage(res.body),
		Method:     req.method,
		Path:       req.path,
	}
}

// decode unmarshals a successful answer into v.
func decode(req request, res *response, v any) error {
	if err := json.Unmarshal(res.body, v); err != nil {
		return fmt.Errorf("%s %s at %s: malformed answer: %v", req.method, req.path, displayAddr(res.from), err)
	}
	return nil
}
