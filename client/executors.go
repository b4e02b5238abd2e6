package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"jobmaster/api"
)

// DrainExecutor drains an executor (POST /v1/executors/{id}/drain): it
// gets no new work, what runs there may go on until deadline (a duration
// such as "30s"; "" for the masters' default), and then it is moved
// elsewhere. Draining again sets a new deadline, so the request is retried
// like a PUT. An unknown executor is an *APIError 404.
func (c *Client) DrainExecutor(ctx context.Context, id, deadline string) (api.DrainResponse, error) {
	var out api.DrainResponse
	body, err := json.Marshal(api.DrainRequest{Deadline: deadline})
	if err != nil {
		return out, err
	}
	res, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/executors/" + url.PathEscape(id) + "/drain", body: body, idempotent: true})
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(res.body, &out)
}

// UndrainExecutor makes a draining executor eligible for work again
// (DELETE /v1/executors/{id}/drain).
func (c *Client) UndrainExecutor(ctx context.Context, id string) (api.DrainResponse, error) {
	var out api.DrainResponse
	res, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/executors/" + url.PathEscape(id) + "/drain", idempotent: true})
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(res.body, &out)
}
