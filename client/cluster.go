package client

import (
	"context"
	"fmt"
	"net/http"

	"jobmaster/api"
	"jobmaster/transport"
)

// Cluster returns the masters (with their Raft roles and the leader), the
// fencing token and the executors, as the answering master sees them.
func (c *Client) Cluster(ctx context.Context) (*api.Cluster, error) {
	var out api.Cluster
	if err := c.get(ctx, "/v1/cluster", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Health asks the one master at address ("host:port" or a base URL, not
// necessarily one of the Client's) whether it knows a leader, without
// failing over to another master. A master that knows no leader answers 503:
// Health then returns its answer with a nil Leader and no error. Any other
// failure (unreachable, unexpected status) is an error.
func (c *Client) Health(ctx context.Context, address string) (*api.Health, error) {
	base, err := parseAddress(address, transport.Scheme(c.http))
	if err != nil {
		return nil, err
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req := request{method: http.MethodGet, path: "/v1/health", idempotent: true}
	res, err := c.attempt(ctx, base, req)
	if err != nil {
		return nil, fmt.Errorf("%s %s at %s: %w", req.method, req.path, displayAddr(base), shortError{err})
	}
	switch res.status {
	case http.StatusOK:
		var out api.Health
		if err := decode(req, res, &out); err != nil {
			return nil, err
		}
		return &out, nil
	case http.StatusServiceUnavailable:
		var out api.Health
		_ = decode(req, res, &out) // the body may be an api.Error instead
		out.Leader = nil
		return &out, nil
	}
	if res.status >= 400 {
		return nil, apiError(req, res)
	}
	return nil, unexpected(req, res)
}
