package client

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"jobmaster/internal/freeport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// server is an httptest server that counts its requests.
type server struct {
	*httptest.Server
	hits atomic.Int64
}

// newServer starts a server running h and counting requests.
func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// addr is the server's host:port.
func (s *server) addr() string { return s.Listener.Addr().String() }

// deadAddr returns a host:port where nothing listens.
// It comes from freeport, so no other test is handed the same port.
func deadAddr(t *testing.T) string { return freeport.Must(t) }

// writeJSON answers with status and v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// newTestClient builds a client with a fast backoff, closed at the end of
// the test.
func newTestClient(t *testing.T, addrs string, opts ...Option) *Client {
	t.Helper()
	c, err := New(addrs, opts...)
	require.NoError(t, err)
	c.backoff = time.Millisecond
	t.Cleanup(c.Close)
	return c
}

// hangUp closes the connection without answering, after reading the
// request: the request reached the server but no answer comes back.
func hangUp(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_ = conn.Close()
	}
}
