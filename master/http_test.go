package master

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every GET answers HEAD too, headers only, as api.md says, and a 405
// names HEAD among the methods a GET path takes.
func TestGETsAnswerHEAD(t *testing.T) {
	c := newTestCluster(t, 1)
	l := c.leader()
	for _, p := range []string{"/v1/jobs", "/v1/cluster", "/v1/health", "/v1/state/hash"} {
		r := do(t, "HEAD", c.url(l, p), nil)
		require.Equal(t, http.StatusOK, r.status, p)
		require.Empty(t, r.body, p)
	}
	r := do(t, "DELETE", c.url(l, "/v1/jobs"), nil)
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
	require.Equal(t, "GET, HEAD, POST", r.header.Get("Allow"))
}
