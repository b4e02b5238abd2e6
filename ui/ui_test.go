package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var peers = Origins("http", []string{"127.0.0.1:7401", "127.0.0.1:7402", ""})

func TestOrigins(t *testing.T) {
	require.Equal(t, []string{"http://127.0.0.1:7401", "http://127.0.0.1:7402"}, peers)
	require.Equal(t, []string{"https://m1.example:7401"}, Origins("https", []string{"M1.example:7401"}))
}

func TestDecide(t *testing.T) {
	peer := "http://127.0.0.1:7402"
	for _, c := range []struct {
		method, pattern, origin, acrm, acrh string
		want                                CrossOrigin
	}{
		{"GET", "/v1/cluster", peer, "", "", AllowRead},
		{"HEAD", "/v1/jobs/{id}", peer, "", "", AllowRead},
		{"GET", "/v1/events", "HTTP://127.0.0.1:7402", "", "", AllowRead},
		{"OPTIONS", "/v1/events", peer, "GET", "x-jobmaster-token", AnswerPreflight},
		{"OPTIONS", "/v1/jobs", peer, "GET", "", AnswerPreflight},
		// A task's log, which the job page shows (its token decides).
		{"GET", "/v1/jobs/{id}/logs", peer, "", "", AllowRead},
		{"OPTIONS", "/v1/jobs/{id}/logs", peer, "GET", "x-jobmaster-token", AnswerPreflight},
		{"GET", "/v1/jobs/{id}/logs", "http://evil.example", "", "", Refuse},
		// Writes stay same-origin, preflighted or not.
		{"POST", "/v1/jobs/{id}/cancel", peer, "", "", Refuse},
		{"PUT", "/v1/jobs/{id}", peer, "", "", Refuse},
		{"OPTIONS", "/v1/jobs/{id}", peer, "PUT", "content-type", Refuse},
		{"OPTIONS", "/v1/jobs/{id}/cancel", peer, "POST", "x-jobmaster-token", Refuse},
		// Another header than the token's: refused.
		{"OPTIONS", "/v1/jobs", peer, "GET", "x-jobmaster-token, authorization", Refuse},
		// Not a read the UI makes.
		{"GET", "/v1/operator/snapshot", peer, "", "", Refuse},
		{"GET", "/v1/acl/tokens", peer, "", "", Refuse},
		// Not a master of the cluster.
		{"GET", "/v1/cluster", "http://127.0.0.1:7403", "", "", Refuse},
		{"GET", "/v1/cluster", "https://127.0.0.1:7402", "", "", Refuse},
		{"GET", "/v1/cluster", "http://evil.example", "", "", Refuse},
		{"GET", "/v1/cluster", "null", "", "", Refuse},
		{"GET", "/v1/cluster", peer + "/", "", "", Refuse},
	} {
		got := Decide(c.method, c.pattern, c.origin, c.acrm, c.acrh, peers)
		assert.Equal(t, c.want, got, "%s %s from %s (%s; %s)", c.method, c.pattern, c.origin, c.acrm, c.acrh)
	}
}

func TestCSP(t *testing.T) {
	csp := CSP(append(peers, "http://x:1; script-src *", "javascript:alert(1)"))
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'",
		"connect-src 'self' http://127.0.0.1:7401 http://127.0.0.1:7402;", "frame-ancestors 'none'", "form-action 'none'"} {
		assert.Contains(t, csp, want)
	}
	assert.NotContains(t, csp, "unsafe")
	assert.NotContains(t, csp, "javascript")
	assert.Equal(t, 1, strings.Count(csp, "script-src"), csp)
}

// The files are embedded and served with the security headers; the
// pages hold no inline script or style, which the CSP would block.
func TestHandlerServesTheEmbeddedFiles(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("", Handler(func() []string { return peers })))
	defer srv.Close()
	for path, ctype := range map[string]string{
		"/ui/":                 "text/html",
		"/ui/app.js":           "text/javascript",
		"/ui/conn.js":          "text/javascript",
		"/ui/pages/job.js":     "text/javascript",
		"/ui/pages/dag.js":     "text/javascript",
		"/ui/app.css":          "text/css",
		"/ui/favicon.svg":      "image/svg+xml",
		"/ui/pages/jobs.js":    "text/javascript",
		"/ui/pages/masters.js": "text/javascript",
	} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("Content-Type"), ctype, path)
		assert.Equal(t, CSP(peers), resp.Header.Get("Content-Security-Policy"), path)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
		assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), path)
		assert.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"), path)
		if strings.HasSuffix(path, "/") {
			assert.NotContains(t, string(body), "<script>", "inline script")
			assert.NotContains(t, string(body), "style=", "inline style")
			assert.NotContains(t, string(body), "<style", "inline style")
		}
		assert.NotContains(t, string(body), "innerHTML", "%s builds markup from strings", path)
		assert.NotContains(t, string(body), "localStorage", "%s keeps something beyond the session", path)
	}
	for _, p := range []string{"/ui/nope.js", "/ui/pages/", "/ui/pages", "/ui/./pages/", "/ui/pages/../pages/"} {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, p)
		assert.NotContains(t, string(body), "dag.js", "%s lists a directory", p)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), p)
		assert.Contains(t, string(body), `{"error":"no such file in the UI: `, p)
	}
}
