package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// errFencedOff: an executor has seen a newer leader than this one.
var errFencedOff = errors.New("fenced off by a newer leader")

// errNoBinary: an executor refused a deploy in binary (415), as one that
// predates the format does; it acted on nothing.
var errNoBinary = errors.New("the executor takes no binary deploy")

// postJSON sends a JSON request to executor at addr (naming it in
// wire.HeaderExecutor) and decodes the JSON answer into out (when non-nil).
// A 409 (the executor's StaleToken answer) is errFencedOff with the
// executor's reason; another status outside 2xx wraps a
// *transport.StatusError.
func postJSON(ctx context.Context, c *http.Client, executor, addr, path string, in, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u, err := transport.PeerURL(c, addr, path)
	if err != nil {
		return err
	}
	hr, err := transport.NewJSONRequest(ctx, http.MethodPost, u, in)
	if err != nil {
		return err
	}
	resp, err := doExecutor(c, hr, executor)
	if err != nil {
		return err
	}
	return rpcError(addr, path, transport.DecodeResponse(resp, transport.MaxResponseBytes, out))
}

// postDeploy sends a deploy to an executor in binary (wire.AppendDeploy)
// and decodes its answer, with postJSON's errors, and errNoBinary for a
// 415.
func postDeploy(ctx context.Context, c *http.Client, executor, addr string, req *wire.DeployRequest, timeout time.Duration) (wire.DeployResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u, err := transport.PeerURL(c, addr, wire.PathDeploy)
	if err != nil {
		return wire.DeployResponse{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(wire.AppendDeploy(nil, req)))
	if err != nil {
		return wire.DeployResponse{}, err
	}
	hr.Header.Set("Content-Type", wire.DeployType)
	resp, err := doExecutor(c, hr, executor)
	if err != nil {
		return wire.DeployResponse{}, err
	}
	data, err := transport.ReadResponse(resp, transport.MaxResponseBytes)
	var se *transport.StatusError
	if errors.As(err, &se) && se.Code == http.StatusUnsupportedMediaType {
		return wire.DeployResponse{}, fmt.Errorf("%w: %s", errNoBinary, se.Message)
	}
	if err != nil {
		return wire.DeployResponse{}, rpcError(addr, wire.PathDeploy, err)
	}
	out, err := wire.DecodeDeployResponse(data)
	if err != nil {
		return out, fmt.Errorf("malformed answer: %w", err)
	}
	return out, nil
}

// postHeartbeat sends a heartbeat to an executor, asking for the report in
// binary (wire.AcceptReport), and decodes the report in whichever format
// it came: an executor that predates binary reports, or writes another
// revision of them, answers JSON, read up to 1 MiB. A report past the
// bounds of one (wire.CheckBounds) is errAnswerRefused. Its errors are
// postJSON's.
func postHeartbeat(ctx context.Context, c *http.Client, executor, addr string, req *wire.HeartbeatRequest, timeout time.Duration) (wire.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rep wire.Report
	u, err := transport.PeerURL(c, addr, wire.PathHeartbeat)
	if err != nil {
		return rep, err
	}
	hr, err := transport.NewJSONRequest(ctx, http.MethodPost, u, req)
	if err != nil {
		return rep, err
	}
	hr.Header.Set("Accept", wire.AcceptReport)
	resp, err := doExecutor(c, hr, executor)
	if err != nil {
		return rep, err
	}
	// JSON (from an executor that predates binary reports) is read whole
	// before its entries can be counted: it gets what a pushed report
	// gets, not 64 MiB of "{}," (millions of statuses).
	ct := resp.Header.Get("Content-Type")
	limit := int64(transport.MaxResponseBytes)
	if !wire.IsReport(ct) {
		limit = transport.MaxRequestBytes
	}
	data, err := transport.ReadResponse(resp, limit)
	if errors.Is(err, transport.ErrTooLarge) {
		return rep, fmt.Errorf("%w: %w", errAnswerRefused, err)
	} else if err != nil {
		return rep, rpcError(addr, wire.PathHeartbeat, err)
	}
	if rep, err = decodeReport(ct, data); err != nil {
		return wire.Report{}, fmt.Errorf("%w: malformed answer: %w", errAnswerRefused, err)
	}
	return rep, nil
}

// doExecutor sends hr to executor, naming it (wire.HeaderExecutor). When c
// speaks TLS the answer counts only if it came over TLS from that
// executor's certificate (an executor starts only with a certificate for
// its own id): else errMisdirected, whatever it says. An answer in the
// clear is refused however the request came to be sent in the clear (a
// URL with a scheme, a redirect): it could be anyone's, and the request
// it answers carried the fencing token and the tasks' commands and env.
func doExecutor(c *http.Client, hr *http.Request, executor string) (*http.Response, error) {
	hr.Header.Set(wire.HeaderExecutor, executor)
	resp, err := c.Do(hr)
	if err != nil {
		return nil, err
	}
	if transport.Scheme(c) != transport.SchemeHTTPS {
		return resp, nil
	}
	if err := transport.AnswerFrom(resp, hr.URL.Host, pki.Executor, executor); err != nil {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w: %w", errMisdirected, err)
	}
	return resp, nil
}

// errAnswerRefused: an executor's report was malformed or past the
// bounds of one (wire.CheckBounds); it counts as no answer.
var errAnswerRefused = errors.New("executor's report refused")

// errMisdirected: the executor at the address is not the one the request
// named (wire.HeaderExecutor); it acted on nothing.
var errMisdirected = errors.New("another executor answers at this address")

// rpcError is an error of a request to addr's path as the callers of
// postJSON see it: errFencedOff for a 409, errMisdirected for a 421, the path named for another
// status outside 2xx, else as it is (nil, or no answer).
func rpcError(addr, path string, err error) error {
	var se *transport.StatusError
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code {
	case http.StatusConflict:
		return fmt.Errorf("%w: %s", errFencedOff, se.Message)
	case http.StatusMisdirectedRequest:
		return fmt.Errorf("%w: %s", errMisdirected, se.Message)
	}
	return fmt.Errorf("%s%s: %w", addr, path, se)
}
