package master

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/membership"
	"jobmaster/transport"
	"jobmaster/wire"
)

// relayMaster is a master as far as relaying logs goes, with limits.
func relayMaster(limits logLimits) *Master {
	return &Master{client: transport.NewClient(transport.ClientOptions{}), stop: make(chan struct{}), logLimits: limits}
}

// relayServer serves log reads through m from the executor at exe, as
// taskLogs does once the state has named it, with allowed as the word of
// the caller's token. Each relay that returns (or breaks off) is sent on
// the channel returned.
func relayServer(t *testing.T, m *Master, exe *httptest.Server, allowed func() bool) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	target := logTarget{id: "e1", addr: strings.TrimPrefix(exe.URL, "http://"), status: membership.StatusAlive}
	ended := make(chan struct{}, 16)
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { ended <- struct{}{} }()
		q, err := parseLogQuery("j", r.URL.Query())
		if !assert.NoError(t, err) {
			return
		}
		ans, asked := m.askLog(r.Context(), target, q)
		if !assert.NotNil(t, ans, "%+v", asked) {
			return
		}
		m.relayLog(w, r, target, q, ans, allowed)
	}))
	t.Cleanup(relay.Close)
	return relay, ended
}

func always() bool { return true }

// awaitEnd waits for a relay to return, for at most what a test bounds
// its wait with.
func awaitEnd(t *testing.T, ended <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the relay went on", what)
	}
}

// A log relayed as it comes: whole, with the executor's trailer, when the
// executor's answer says it is complete; broken off when the executor's
// answer ends without it, so that a reader that cannot see trailers still
// tells a cut log from a whole one. At once, at most tail bytes.
func TestRelayLogEndsCleanlyOnlyWhenComplete(t *testing.T) {
	complete := make(chan bool, 1)
	exe := httptest.NewServer(transport.Role(transport.RoleExecutor, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, wire.PathLogs, r.URL.Path)
		assert.Equal(t, "j/v/0/0", r.URL.Query().Get("id"))
		if r.URL.Query().Get("follow") != "1" {
			assert.Equal(t, "4", r.URL.Query().Get("tail"))
			_, _ = io.WriteString(w, "6789")
			return
		}
		w.Header().Set("Trailer", wire.HeaderEnd)
		_, _ = io.WriteString(w, "line 1\n")
		http.NewResponseController(w).Flush()
		_, _ = io.WriteString(w, "line 2\n")
		if <-complete {
			w.Header().Set(wire.HeaderEnd, wire.EndComplete)
		}
	})))
	defer exe.Close()
	relay, _ := relayServer(t, relayMaster(defaultLogLimits()), exe, always)

	get := func(query string) (*http.Response, []byte, error) {
		resp, err := http.Get(relay.URL + "/?" + query)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	complete <- true
	resp, body, err := get("execution=j/v/0/0&follow=1")
	require.NoError(t, err)
	require.Equal(t, "line 1\nline 2\n", string(body))
	require.Equal(t, wire.EndComplete, resp.Trailer.Get(wire.HeaderEnd))
	require.Equal(t, "e1", resp.Header.Get(api.LogExecutorHeader))
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))

	complete <- false
	_, body, err = get("execution=j/v/0/0&follow=1")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "a cut log must not read as a whole one")
	require.Equal(t, "line 1\nline 2\n", string(body))

	resp, body, err = get("execution=j/v/0/0&tail=4")
	require.NoError(t, err)
	require.Equal(t, "6789", string(body))
	require.Equal(t, int64(4), resp.ContentLength)
	require.Empty(t, resp.Trailer.Get(wire.HeaderEnd))
}

// A log read at once is relayed only when the executor's answer says its
// length, within the tail asked: a master could not tell a cut answer from
// a whole one, nor pass on a length it can check. Else a 502 names the
// executor and what it did.
func TestAskLogAtOnceWantsALength(t *testing.T) {
	exe := httptest.NewServer(transport.Role(transport.RoleExecutor, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("stream") {
		case "stdout": // no length: chunked
			_, _ = io.WriteString(w, "01")
			http.NewResponseController(w).Flush()
			_, _ = io.WriteString(w, "23")
		default: // longer than the tail
			_, _ = io.WriteString(w, "0123456789")
		}
	})))
	defer exe.Close()
	m := relayMaster(defaultLogLimits())
	target := logTarget{id: "e1", addr: strings.TrimPrefix(exe.URL, "http://"), status: membership.StatusAlive}
	for _, c := range []struct{ stream, msg string }{
		{"stdout", "executor e1 answered the log of j/v/0/0 without a length: a master relays a log read at once only when it can check its end"},
		{"stderr", "executor e1 answered the log of j/v/0/0 with a length of 10 bytes, past the 4 asked"},
	} {
		q, err := parseLogQuery("j", url.Values{"execution": {"j/v/0/0"}, "stream": {c.stream}, "tail": {"4"}})
		require.NoError(t, err)
		ans, asked := m.askLog(context.Background(), target, q)
		require.Nil(t, ans, c.stream)
		status, msg := logFailure(q, logPlan{executor: "e1", state: wire.StateRunning}, &asked)
		require.Equal(t, http.StatusBadGateway, status, c.stream)
		require.Equal(t, c.msg, msg, c.stream)
	}
	// Followed, a length is neither expected nor taken.
	q, err := parseLogQuery("j", url.Values{"execution": {"j/v/0/0"}, "follow": {"1"}})
	require.NoError(t, err)
	ans, asked := m.askLog(context.Background(), target, q)
	require.NotNil(t, ans, "%+v", asked)
	ans.cancel()
	ans.resp.Body.Close()
}

// A followed log of a task that writes nothing (not started, quiet, or of
// the sim runtime) gets its headers at once, not when the task first
// writes: a reader waiting for them (the UI gives up after 10 s) would
// take the master for one that does not answer.
func TestRelayLogFollowedSendsItsHeadersAtOnce(t *testing.T) {
	release := make(chan struct{})
	exe := httptest.NewServer(transport.Role(transport.RoleExecutor, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", wire.HeaderEnd)
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		select { // silent until the test has its headers
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "late\n")
		w.Header().Set(wire.HeaderEnd, wire.EndComplete)
	})))
	defer exe.Close()
	defer close(release)
	relay, _ := relayServer(t, relayMaster(defaultLogLimits()), exe, always)
	got := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Get(relay.URL + "/?execution=j/v/0/0&follow=1")
		if assert.NoError(t, err) {
			got <- resp
		}
	}()
	select {
	case resp := <-got:
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "e1", resp.Header.Get(api.LogExecutorHeader))
	case <-time.After(logAnswerTimeout):
		t.Fatalf("no headers within %v while the task wrote nothing", logAnswerTimeout)
	}
}

// A followed log ends, broken off, when the master stops.
func TestRelayLogStopsWithTheMaster(t *testing.T) {
	exe := httptest.NewServer(transport.Role(transport.RoleExecutor, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", wire.HeaderEnd)
		_, _ = io.WriteString(w, "started\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // the task never ends
	})))
	defer exe.Close()
	m := relayMaster(defaultLogLimits())
	relay, _ := relayServer(t, m, exe, always)
	resp, err := http.Get(relay.URL + "/?execution=j/v/0/0&follow=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	line := make([]byte, len("started\n"))
	_, err = io.ReadFull(resp.Body, line)
	require.NoError(t, err)
	close(m.stop)
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); done <- err }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	case <-time.After(10 * time.Second):
		t.Fatal("the follow went on after the master stopped")
	}
}

// floodingExecutor answers a followed log with bytes for as long as they
// are taken; blocked is closed once a write of its has waited 100 ms: the
// relay reads no more, held up by its caller.
func floodingExecutor(t *testing.T) (exe *httptest.Server, blocked <-chan struct{}) {
	held := make(chan struct{})
	exe = httptest.NewServer(transport.Role(transport.RoleExecutor, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", wire.HeaderEnd)
		rc := http.NewResponseController(w)
		chunk := []byte(strings.Repeat("x", 32<<10))
		for {
			_ = rc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, err := w.Write(chunk)
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				close(held)
				<-r.Context().Done()
				return
			}
		}
	})))
	t.Cleanup(exe.Close)
	return exe, held
}

// stalledReader sends a followed log read to relay and reads its headers,
// then nothing more.
func stalledReader(t *testing.T, relay *httptest.Server) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(relay.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, "GET /?execution=j/v/0/0&follow=1 HTTP/1.1\r\nHost: relay\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// A caller that stops reading a followed log holds its relay no longer
// than a write may take, though the executor has more to send.
func TestRelayLogOfAReaderThatStopsReadingEnds(t *testing.T) {
	exe, _ := floodingExecutor(t)
	limits := defaultLogLimits()
	limits.write = 200 * time.Millisecond
	relay, ended := relayServer(t, relayMaster(limits), exe, always)
	stalledReader(t, relay)
	awaitEnd(t, ended, "a reader that reads nothing")
}

// A followed log whose caller's token is deleted, or whose master stops,
// ends though its caller reads nothing and its relay is held up in a
// write: the write returns at once.
func TestRelayLogHeldUpByItsReaderIsCut(t *testing.T) {
	for _, by := range []string{"the token deleted", "the master stopping"} {
		t.Run(by, func(t *testing.T) {
			exe, blocked := floodingExecutor(t)
			limits := defaultLogLimits()
			limits.write = time.Hour // the cut, not the write's bound, ends it
			limits.tokenCheck = 10 * time.Millisecond
			m := relayMaster(limits)
			var allowed atomic.Bool
			allowed.Store(true)
			relay, ended := relayServer(t, m, exe, allowed.Load)
			stalledReader(t, relay)
			select {
			case <-blocked:
			case <-time.After(10 * time.Second):
				t.Fatal("the relay never held the executor up")
			}
			if by == "the token deleted" {
				allowed.Store(false)
			} else {
				close(m.stop)
			}
			awaitEnd(t, ended, by)
		})
	}
}

// A log read at once from an executor that trickles its answer ends by
// the read's deadline, broken off: the caller is told it is cut.
func TestRelayLogAtOnceHasADeadline(t *testing.T) {
	release := make(chan struct{})
	exe := httptest.NewServer(transport.Role(transport.RoleExecutor, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		_, _ = io.WriteString(w, "01")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})))
	defer exe.Close()
	defer close(release)
	limits := defaultLogLimits()
	limits.atOnce = 300 * time.Millisecond
	relay, ended := relayServer(t, relayMaster(limits), exe, always)
	read := make(chan error, 1)
	go func() {
		resp, err := http.Get(relay.URL + "/?execution=j/v/0/0&tail=100")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		read <- err
	}()
	awaitEnd(t, ended, "an executor that trickles")
	// Broken off before its headers (the bytes so far were buffered) or
	// after: never a whole answer.
	require.Error(t, <-read)
}

// One caller, its token's or, without ACLs, its address's, has at most
// perCaller log reads relayed at once (429 past it), whatever the room
// left; the master at most most in all (503 past it).
func TestRelayRefusal(t *testing.T) {
	ci := relayCallerOf(&caller{token: fsm.ACLToken{Name: "ci", AccessorID: "a1b2"}}, "10.0.0.7:5000")
	require.Equal(t, relayCaller{key: "token a1b2", name: `token "ci" (accessor a1b2)`}, ci)
	anon := relayCallerOf(nil, "10.0.0.7:5000")
	require.Equal(t, relayCaller{key: "address 10.0.0.7", name: "client 10.0.0.7"}, anon)
	// An IPv6 caller counts as its /64 (one host's usual share): two
	// addresses of one /64 are one caller, of two /64s two.
	require.Equal(t, "address ::/64", relayCallerOf(nil, "[::1]:80").key)
	require.Equal(t, relayCallerOf(nil, "[2001:db8:1:2::7]:5000"), relayCallerOf(nil, "[2001:db8:1:2:ffff::9%eth0]:6000"))
	require.Equal(t, relayCaller{key: "address 2001:db8:1:2::/64", name: "client 2001:db8:1:2::/64"}, relayCallerOf(nil, "[2001:db8:1:2::7]:5000"))
	require.NotEqual(t, relayCallerOf(nil, "[2001:db8:1:2::7]:5000"), relayCallerOf(nil, "[2001:db8:1:3::7]:5000"))
	// An IPv4 address seen as IPv6 (a dual-stack listener) is the IPv4 one.
	require.Equal(t, "address 10.0.0.7", relayCallerOf(nil, "[::ffff:10.0.0.7]:5000").key)
	for _, c := range []struct {
		name               string
		mine, total        int
		status             int
		msg                string
		perCaller, maxRoom int
	}{
		{name: "room", mine: 15, total: 100, perCaller: 16, maxRoom: 256},
		{name: "the caller at its bound", mine: 16, total: 100, perCaller: 16, maxRoom: 256, status: http.StatusTooManyRequests,
			msg: `token "ci" (accessor a1b2) has 16 log reads relayed by master m1 already, the most one caller may have at once`},
		{name: "the caller at its bound, the master full", mine: 16, total: 256, perCaller: 16, maxRoom: 256, status: http.StatusTooManyRequests},
		{name: "the master full", mine: 0, total: 256, perCaller: 16, maxRoom: 256, status: http.StatusServiceUnavailable,
			msg: "master m1 relays 256 logs already, the most it relays at once"},
	} {
		status, msg := relayRefusal("m1", ci, c.mine, c.total, c.perCaller, c.maxRoom)
		require.Equal(t, c.status, status, c.name)
		require.Contains(t, msg, c.msg, c.name)
	}
}

// The places a master holds: one caller's bound leaves others room; a
// place given back is taken again.
func TestLogRelaysPerCaller(t *testing.T) {
	l := newLogRelays(5, 2)
	a, b, c := relayCaller{key: "a", name: "client a"}, relayCaller{key: "b", name: "client b"}, relayCaller{key: "c", name: "client c"}
	var held []func()
	for _, who := range []relayCaller{a, a, b, b} {
		release, status, msg := l.take("m1", who)
		require.Zero(t, status, msg)
		held = append(held, release)
	}
	_, status, msg := l.take("m1", a)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Contains(t, msg, "client a has 2 log reads relayed by master m1 already")
	release, status, _ := l.take("m1", c)
	require.Zero(t, status)
	_, status, _ = l.take("m1", c)
	require.Equal(t, http.StatusServiceUnavailable, status, "5 in all")
	release()
	release() // once only
	held[0]()
	_, status, _ = l.take("m1", a)
	require.Zero(t, status, "a's place given back")
	require.Equal(t, 4, l.total)
}
