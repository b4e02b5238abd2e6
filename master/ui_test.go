package master

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
)

// The UI is served without a token at /ui/ (/ redirects there), with a
// CSP that lets it reach the cluster's masters; those masters let its
// pages read them, and nothing more, across origins.
func TestUIServedAndItsCrossOriginReads(t *testing.T) {
	c, _ := aclCluster(t)
	l, f := c.leader(), c.follower()
	root := tokenOf(t, do(t, "POST", c.url(l, "/v1/acl/bootstrap"), nil))
	tok := auth(root.SecretID)
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/ui-x"), []byte(simpleJob), tok...))

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(c.url(f, "/"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	assert.Equal(t, "/ui/", resp.Header.Get("Location"))

	r := do(t, "GET", c.url(f, "/ui/"), nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	csp := r.header.Get("Content-Security-Policy")
	for i := range c.masters {
		assert.Contains(t, csp, "http://"+c.masters[i].HTTPAddr(), "the CSP lets the page reach every master")
	}
	assert.Contains(t, csp, "script-src 'self'")

	peer := "http://" + c.masters[l].HTTPAddr() // a page the leader served
	with := func(h ...string) []string { return append(append([]string{}, tok...), h...) }

	// A read from a page of another master: served, readable by it.
	r = do(t, "GET", c.url(f, "/v1/jobs/ui-x"), nil, with("Origin", peer)...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, peer, r.header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, r.header.Get("Access-Control-Expose-Headers"), "X-Jobmaster-Index")
	// Still with its token checked.
	r = do(t, "GET", c.url(f, "/v1/cluster"), nil, "Origin", peer)
	assert.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)

	// The browser's preflight of such a read, which carries no token.
	r = do(t, "OPTIONS", c.url(f, "/v1/events"), nil, "Origin", peer,
		"Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "x-jobmaster-token")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	assert.Equal(t, peer, r.header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "X-Jobmaster-Token", r.header.Get("Access-Control-Allow-Headers"))
	assert.Equal(t, "GET", r.header.Get("Access-Control-Allow-Methods"))

	// Writes stay same-origin, and other sites stay out.
	r = do(t, "POST", c.url(f, "/v1/jobs/ui-x/cancel"), nil, with("Origin", peer)...)
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	r = do(t, "OPTIONS", c.url(f, "/v1/jobs/ui-x/cancel"), nil, "Origin", peer, "Access-Control-Request-Method", "POST")
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	r = do(t, "GET", c.url(f, "/v1/operator/snapshot"), nil, with("Origin", peer)...)
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	r = do(t, "GET", c.url(f, "/v1/cluster"), nil, with("Origin", "http://evil.example")...)
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Empty(t, r.header.Get("Access-Control-Allow-Origin"))
	r = do(t, "OPTIONS", c.url(f, "/v1/cluster"), nil, "Origin", "http://evil.example", "Access-Control-Request-Method", "GET")
	assert.Equal(t, http.StatusForbidden, r.status, "%s", r.body)

	// The same-origin write the UI's cancel button makes: no body, no type.
	own := "http://" + c.masters[f].HTTPAddr()
	r = do(t, "POST", c.url(f, "/v1/jobs/ui-x/cancel"), nil, with("Origin", own)...)
	assert.Equal(t, http.StatusAccepted, r.status, "%s", r.body)

	// What the pages show beyond the DESIGN's fields.
	list := decode[struct {
		Jobs []struct {
			ID         string `json:"id"`
			SubmitTime int64  `json:"submit_time_ms"`
		} `json:"jobs"`
	}](t, do(t, "GET", c.url(l, "/v1/jobs"), nil, tok...))
	require.Len(t, list.Jobs, 1)
	assert.NotZero(t, list.Jobs[0].SubmitTime)

	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/ui-dag"), []byte(`{"name": "dag", "vertices": [
		{"id": "a", "parallelism": 2, "command": ["true"]},
		{"id": "b", "parallelism": 2, "command": ["true"], "inputs": [{"from": "a", "distribution": "forward"}]}]}`), tok...))
	job := decode[api.Job](t, do(t, "GET", c.url(l, "/v1/jobs/ui-dag"), nil, tok...))
	require.Len(t, job.Vertices, 2)
	assert.Empty(t, job.Vertices[0].Inputs)
	assert.Equal(t, []api.Input{{From: "a", Mode: "pipelined", Distribution: "forward"}}, job.Vertices[1].Inputs)
}
