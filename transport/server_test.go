package transport

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewServerBounds(t *testing.T) {
	srv := NewServer(http.NotFoundHandler(), ServerOptions{})
	assert.Equal(t, DefaultReadTimeout, srv.ReadTimeout)
	assert.Equal(t, DefaultIdleTimeout, srv.IdleTimeout)
	assert.Equal(t, MaxHeaderBytes, srv.MaxHeaderBytes)
	assert.NotNil(t, srv.ConnState, "connections are counted per client")
	assert.Zero(t, srv.WriteTimeout, "streams are not cut")
	srv = NewServer(http.NotFoundHandler(), ServerOptions{MaxConnsPerClient: -1, ReadTimeout: time.Second})
	assert.Nil(t, srv.ConnState)
	assert.Equal(t, time.Second, srv.ReadTimeout)
}

// A body that arrives slower than the read timeout is cut off, unless the
// handler lifted the deadline; an answer that takes longer is not.
func TestReadTimeoutAndUnbounded(t *testing.T) {
	run := func(lift bool, slowBody bool) error {
		srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if lift {
				require.NoError(t, Unbounded(w))
			}
			if _, err := io.ReadAll(r.Body); err != nil {
				Compact.WriteError(w, http.StatusBadRequest, err.Error())
				return
			}
			select {
			case <-r.Context().Done():
				Compact.WriteError(w, http.StatusGatewayTimeout, "cancelled")
			case <-time.After(400 * time.Millisecond): // a long answer
				Compact.WriteJSON(w, http.StatusOK, answer{N: 1})
			}
		}), ServerOptions{ReadTimeout: 150 * time.Millisecond})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go func() { _ = Serve(srv, ln) }()
		defer srv.Close()
		var body io.Reader = strings.NewReader("{}")
		if slowBody {
			pr, pw := io.Pipe()
			go func() {
				for range 4 {
					time.Sleep(100 * time.Millisecond)
					_, _ = pw.Write([]byte(" "))
				}
				pw.Close()
			}()
			body = pr
		}
		resp, err := http.Post("http://"+ln.Addr().String()+"/", JSONType, body)
		if err != nil {
			return err
		}
		return DecodeResponse(resp, 1<<10, nil)
	}
	require.NoError(t, run(false, false), "a long answer outlives the read timeout")
	require.Error(t, run(false, true), "a body slower than the read timeout is cut off")
	require.NoError(t, run(true, true))
}

func TestHeaderBlockBounded(t *testing.T) {
	srv := NewServer(http.NotFoundHandler(), ServerOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = Serve(srv, ln) }()
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	require.NoError(t, err)
	req.Header.Set("X-Big", strings.Repeat("x", 2*MaxHeaderBytes))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
}

// fakeConn is a connection from a given address.
type fakeConn struct {
	net.Conn
	remote net.Addr
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

// fakePorts gives each fake connection a port of its own, as the kernel
// gives each live connection.
var fakePorts atomic.Int32

func conn(ip string) *fakeConn {
	return &fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000 + int(fakePorts.Add(1))}}
}

func TestConnLimiter(t *testing.T) {
	var logged bytes.Buffer
	now := time.Unix(1000, 0)
	l := newConnLimiter(2, slog.New(slog.NewTextHandler(&logged, nil)), func() time.Time { return now })
	a1, a2, a3, b1 := conn("10.0.0.1"), conn("10.0.0.1"), conn("10.0.0.1"), conn("10.0.0.2")
	for _, c := range []*fakeConn{a1, a2, a3, b1} {
		l.track(c, http.StateNew)
	}
	assert.False(t, a1.closed)
	assert.False(t, a2.closed)
	assert.True(t, a3.closed, "a third connection from one client is refused")
	assert.False(t, b1.closed, "another client has its own count")
	assert.Contains(t, logged.String(), "connection refused")
	assert.Contains(t, logged.String(), "client=10.0.0.1")

	// One refusal line per client and interval.
	logged.Reset()
	l.track(conn("10.0.0.1"), http.StateNew)
	assert.Empty(t, logged.String())
	now = now.Add(refusalLogEvery)
	l.track(conn("10.0.0.1"), http.StateNew)
	assert.Contains(t, logged.String(), "refused=2")

	// A closed connection makes room.
	l.track(a1, http.StateActive)
	l.track(a1, http.StateIdle)
	l.track(a1, http.StateClosed)
	a4 := conn("10.0.0.1")
	l.track(a4, http.StateNew)
	assert.False(t, a4.closed)
	l.track(a2, http.StateHijacked)
	l.track(a4, http.StateClosed)
	l.track(b1, http.StateClosed)
	assert.Empty(t, l.open, "every counted connection was released")
	assert.Empty(t, l.counted)

	// A connection whose peer proved a node's identity stops counting:
	// the client's next connections are admitted past the bound; one
	// that never proves it still counts.
	n1, n2, n3 := conn("10.0.0.3"), conn("10.0.0.3"), conn("10.0.0.3")
	l.track(n1, http.StateNew)
	l.track(n2, http.StateNew)
	l.exempt(n1)
	l.exempt(n2)
	l.track(n3, http.StateNew)
	assert.False(t, n3.closed, "the node's earlier connections do not count")
	more := []*fakeConn{conn("10.0.0.3"), conn("10.0.0.3")}
	for _, c := range more {
		l.track(c, http.StateNew)
	}
	assert.False(t, more[0].closed)
	assert.True(t, more[1].closed, "connections without the proof still count")
	for _, c := range append([]*fakeConn{n1, n2, n3}, more...) {
		l.track(c, http.StateClosed)
	}
	assert.Empty(t, l.open, "every counted connection was released, none twice")

	// Loopback is not counted.
	for range 5 {
		c := conn("127.0.0.1")
		l.track(c, http.StateNew)
		assert.False(t, c.closed)
	}
	assert.Empty(t, l.open)
}

// Over a real listener: the refused connection is closed before it is
// served.
func TestConnLimitOverTheWire(t *testing.T) {
	l := newConnLimiter(1, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		Compact.WriteJSON(w, http.StatusOK, answer{N: 1})
	}), ServerOptions{})
	// Loopback is exempt: count these connections as a foreign client's.
	var mu sync.Mutex
	as := map[net.Conn]*fakeConn{}
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		f, ok := as[c]
		if !ok {
			f = &fakeConn{Conn: c, remote: &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}}
			as[c] = f
		}
		mu.Unlock()
		l.track(f, s)
		if f.closed {
			c.Close()
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = Serve(srv, ln) }()
	defer srv.Close()
	get := func(c net.Conn) (string, error) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			return "", err
		}
		buf := make([]byte, 12)
		_, err := io.ReadFull(c, buf)
		return string(buf), err
	}
	first, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer first.Close()
	got, err := get(first)
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1 200", got)
	second, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer second.Close()
	_, err = get(second)
	require.Error(t, err, "the second connection of the client is closed unserved")
}
