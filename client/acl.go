package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"jobmaster/api"
)

// BootstrapACL creates the cluster's first management token (POST
// /v1/acl/bootstrap) and returns it with its secret, which is shown this
// once. A cluster bootstrapped already answers an *APIError 409. With
// secret (16 to 128 characters), the token gets that secret, and the
// request is idempotent: it is retried like a PUT, and repeating it
// answers with the same token. Without, the masters choose the secret; a
// request that may have reached a master and got no answer is then an
// error wrapping ErrOutcomeUnknown (the token may exist, its secret lost).
func (c *Client) BootstrapACL(ctx context.Context, secret string) (*api.ACLToken, error) {
	req := request{method: http.MethodPost, path: "/v1/acl/bootstrap",
		unknownOn: []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}}
	if secret != "" {
		body, err := json.Marshal(api.ACLBootstrapRequest{SecretID: secret})
		if err != nil {
			return nil, err
		}
		req.body, req.idempotent = body, true
	}
	return c.tokenCall(ctx, req)
}

// CreateToken creates a token (POST /v1/acl/tokens) with a name and a
// policy (read, submit or management) and returns it with its secret,
// shown this once. It needs a management token (WithToken). As with
// BootstrapACL, a request with a SecretID is idempotent and retried.
func (c *Client) CreateToken(ctx context.Context, t api.ACLTokenRequest) (*api.ACLToken, error) {
	body, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	return c.tokenCall(ctx, request{method: http.MethodPost, path: "/v1/acl/tokens", body: body, idempotent: t.SecretID != "",
		unknownOn: []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}})
}

func (c *Client) tokenCall(ctx context.Context, req request) (*api.ACLToken, error) {
	res, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	if res.status != http.StatusCreated && res.status != http.StatusOK {
		return nil, unexpected(req, res)
	}
	var out api.ACLToken
	if err := decode(req, res, &out); err != nil {
		return nil, err
	}
	if out.SecretID == "" || out.AccessorID == "" {
		return nil, fmt.Errorf("%s %s at %s: the answer has no token", req.method, req.path, displayAddr(res.from))
	}
	return &out, nil
}

// Tokens lists every token, oldest first, without secrets (GET
// /v1/acl/tokens; a management token's request).
func (c *Client) Tokens(ctx context.Context) ([]api.ACLToken, error) {
	var out api.ACLTokenList
	if err := c.get(ctx, "/v1/acl/tokens", &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// DeleteToken deletes a token by its accessor id (DELETE
// /v1/acl/tokens/{accessor}); an unknown one is an *APIError 404, the last
// management token an *APIError 409.
func (c *Client) DeleteToken(ctx context.Context, accessor string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/acl/tokens/" + url.PathEscape(accessor), idempotent: true})
	return err
}
