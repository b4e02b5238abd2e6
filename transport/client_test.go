package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewClientOptions(t *testing.T) {
	c := NewClient(ClientOptions{Timeout: 2 * time.Second, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second})
	assert.Equal(t, 2*time.Second, c.Timeout)
	tr := c.Transport.(*http.Transport)
	assert.Equal(t, 64, tr.MaxIdleConnsPerHost)
	assert.Equal(t, 30*time.Second, tr.IdleConnTimeout)
	assert.Nil(t, tr.Proxy, "peers are reached directly")

	tr = NewClient(ClientOptions{EnvironmentProxy: true}).Transport.(*http.Transport)
	assert.NotNil(t, tr.Proxy)
	assert.Equal(t, DefaultMaxIdleConnsPerHost, tr.MaxIdleConnsPerHost)
	assert.Equal(t, DefaultIdleConnTimeout, tr.IdleConnTimeout)
}

func TestServe(t *testing.T) {
	var logged strings.Builder
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		Compact.WriteJSON(w, http.StatusOK, answer{N: 1})
	}), ServerOptions{IdleTimeout: time.Minute, Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	assert.Equal(t, ReadHeaderTimeout, srv.ReadHeaderTimeout)
	assert.Equal(t, time.Minute, srv.IdleTimeout)
	require.NotNil(t, srv.ErrorLog)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- Serve(srv, ln) }()

	c := NewClient(ClientOptions{})
	var out answer
	req, err := NewJSONRequest(context.Background(), http.MethodPost, URL(c, ln.Addr().String(), "/"), struct{}{})
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	require.NoError(t, DecodeResponse(resp, MaxResponseBytes, &out))
	assert.Equal(t, answer{N: 1}, out)
	c.CloseIdleConnections()

	require.NoError(t, srv.Shutdown(context.Background()))
	require.NoError(t, <-done, "a server shut down ends without an error")

	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln2.Close()
	err = Serve(NewServer(http.NotFoundHandler(), ServerOptions{}), ln2)
	require.Error(t, err, "a closed listener is an error")
	assert.False(t, errors.Is(err, http.ErrServerClosed))
}

// A peer's answer whose headers take more than MaxResponseHeaderBytes is
// refused: a peer cannot make a node hold megabytes of headers per answer
// (Go's default is 10 MB). Headers of a few KiB, more than any node sends,
// pass.
func TestClientRefusesHugeAnswerHeaders(t *testing.T) {
	size := make(chan int, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("x", <-size))
	}))
	defer srv.Close()
	c := NewClient(ClientOptions{})
	size <- 16 << 10
	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	size <- MaxResponseHeaderBytes + 1
	_, err = c.Get(srv.URL)
	require.ErrorContains(t, err, "server response headers exceeded")
}
