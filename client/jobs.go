package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"jobmaster/api"
)

// SubmitJob submits spec under id with PUT /v1/jobs/{id}. It is idempotent:
// created is true when this call created the job and false when the same
// spec was already there. A different spec under the same id is an *APIError
// with status 409; an invalid spec one with status 400 (or 413).
func (c *Client) SubmitJob(ctx context.Context, id string, spec []byte) (created bool, err error) {
	req := request{method: http.MethodPut, path: jobPath(id), body: spec, idempotent: true}
	res, err := c.do(ctx, req)
	if err != nil {
		return false, err
	}
	switch res.status {
	case http.StatusCreated:
		return true, nil
	case http.StatusOK:
		return false, nil
	}
	return false, unexpected(req, res)
}

// CreateJob submits spec under an id the masters generate, with POST
// /v1/jobs, and returns that id. It is sent again only when no master could
// be reached at all; when the request may have been received but no answer
// came, the error wraps ErrOutcomeUnknown (the job may exist).
func (c *Client) CreateJob(ctx context.Context, spec []byte) (id string, err error) {
	// A 502, 503 or 504 may follow a commit (docs/api.md): the job may exist.
	req := request{method: http.MethodPost, path: "/v1/jobs", body: spec,
		unknownOn: []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}}
	res, err := c.do(ctx, req)
	if err != nil {
		return "", err
	}
	if res.status != http.StatusCreated && res.status != http.StatusOK {
		return "", unexpected(req, res)
	}
	var out api.SubmitResponse
	if err := decode(req, res, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", fmt.Errorf("%s %s at %s: the answer has no job id", req.method, req.path, displayAddr(res.from))
	}
	return out.ID, nil
}

// Jobs lists every job.
func (c *Client) Jobs(ctx context.Context) ([]api.JobSummary, error) {
	return c.JobsWhere(ctx, JobFilter{})
}

// JobFilter narrows a job list: the jobs of these statuses (any when
// none) whose id starts with Prefix.
type JobFilter struct {
	Statuses []string
	Prefix   string
}

// JobsWhere lists the jobs f keeps. An unknown status is an *APIError with
// status 400.
func (c *Client) JobsWhere(ctx context.Context, f JobFilter) ([]api.JobSummary, error) {
	q := url.Values{}
	if len(f.Statuses) > 0 {
		q.Set("status", strings.Join(f.Statuses, ","))
	}
	if f.Prefix != "" {
		q.Set("prefix", f.Prefix)
	}
	path := "/v1/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.JobList
	if err := c.get(ctx, path, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// Job returns one job with the current attempt of every subtask. An unknown
// job is an *APIError with status 404 (see IsNotFound).
func (c *Client) Job(ctx context.Context, id string) (*api.Job, error) {
	job, _, err := c.JobAt(ctx, id)
	return job, err
}

// JobAt is Job, also returning the index the answer was read at: an event
// stream from that index (Events) continues the answer exactly. The index
// is 0 if the master did not say.
func (c *Client) JobAt(ctx context.Context, id string) (*api.Job, uint64, error) {
	var out api.Job
	index, err := c.getIndexed(ctx, jobPath(id), &out)
	if err != nil {
		return nil, 0, err
	}
	return &out, index, nil
}

// CancelJob asks the masters to cancel a job, with POST
// /v1/jobs/{id}/cancel. It returns once the request is accepted (202); the
// job reaches CANCELED later. Cancelling is idempotent, so the request is
// retried like a PUT.
func (c *Client) CancelJob(ctx context.Context, id string) error {
	_, err := c.CancelJobStatus(ctx, id)
	return err
}

// CancelJobStatus is CancelJob, also returning what the masters answered:
// the job's status once the cancel was committed (CANCELLING or CANCELED
// when it took effect; Unchanged, the status the job already had when it was
// ending or had ended). Status is "" from a master that does not say.
func (c *Client) CancelJobStatus(ctx context.Context, id string) (api.CancelResponse, error) {
	req := request{method: http.MethodPost, path: jobPath(id) + "/cancel", idempotent: true}
	res, err := c.do(ctx, req)
	if err != nil {
		return api.CancelResponse{}, err
	}
	if res.status != http.StatusAccepted && res.status != http.StatusOK && res.status != http.StatusNoContent {
		return api.CancelResponse{}, unexpected(req, res)
	}
	out := api.CancelResponse{ID: id}
	_ = json.Unmarshal(res.body, &out) // an older master's answer may say nothing
	return out, nil
}

// jobPath is the path of one job.
func jobPath(id string) string {
	return "/v1/jobs/" + url.PathEscape(id)
}

// get sends an idempotent GET and decodes its 200 answer into out.
func (c *Client) get(ctx context.Context, path string, out any) error {
	_, err := c.getIndexed(ctx, path, out)
	return err
}

// getIndexed is get, also returning the index the answer was read at (0
// if the master did not say).
func (c *Client) getIndexed(ctx context.Context, path string, out any) (uint64, error) {
	req := request{method: http.MethodGet, path: c.readPath(path), idempotent: true}
	res, err := c.do(ctx, req)
	if err != nil {
		return 0, err
	}
	if res.status != http.StatusOK {
		return 0, unexpected(req, res)
	}
	index, _ := strconv.ParseUint(res.index, 10, 64)
	return index, decode(req, res, out)
}

// unexpected is the error of a success answer with a status the API does
// not give for this request.
func unexpected(req request, res *response) error {
	return fmt.Errorf("%s %s at %s: unexpected answer HTTP %d %s", req.method, req.path, displayAddr(res.from), res.status, http.StatusText(res.status))
}
