package transport

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// Answers are for people reading curl's output: an arrow stays an arrow.
func TestAnswersDoNotEscapeHTML(t *testing.T) {
	for _, f := range []Format{Compact, Indented} {
		_, b := f.Body(200, map[string]string{"error": "the job graph has a cycle: a -> b -> a & <c>"})
		require.Contains(t, string(b), "a -> b -> a & <c>")
		require.True(t, bytes.HasSuffix(b, []byte("}\n")), "%q", b)
		require.False(t, bytes.HasSuffix(b, []byte("\n\n")), "%q", b)
	}
}

// A client follows no redirect: the peer's answer is what it gets.
func TestClientsFollowNoRedirect(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the redirect was followed, with token %q", r.Header.Get(TokenHeader))
	}))
	defer elsewhere.Close()
	srv := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/x", http.StatusTemporaryRedirect))
	defer srv.Close()
	c := NewClient(ClientOptions{Token: "secret"})
	resp, err := c.Post(srv.URL+"/v1/internal/deploy", "application/json", bytes.NewReader([]byte(`{}`)))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
}
