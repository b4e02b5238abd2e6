package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"jobmaster/internal/freeport"
	"jobmaster/wire"
)

// The test binary doubles as the task shim and as a stand-alone executor
// process (for the kill -9 test): these first arguments select the role.
const (
	shimArg      = "__executor_test_shim__"
	childExecArg = "__executor_test_child__"
)

// ignoreProbe: memberlist's Shutdown does not wait for a probe in flight,
// which ends by itself within the probe interval.
var ignoreProbe = goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode")

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case shimArg:
			os.Exit(RunShim(os.Args[2:]))
		case childExecArg:
			os.Exit(runChildExecutor(os.Args[2:]))
		}
	}
	goleak.VerifyTestMain(m, ignoreProbe)
}

// testBinary is this test binary, which runs the shim when given shimArg.
func testBinary(t testing.TB) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

// waitFor polls cond until it holds, and fails the test after a bound that
// only a broken implementation reaches.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testLogger logs to t until the test ends (goroutines that outlive it, such
// as memberlist's, may still log; that output is dropped).
func testLogger(t testing.TB) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(w.close) // registered first, so it runs last
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// fakeClock is an injected clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// startExecutor starts an executor on 127.0.0.1:0 (sim runtime unless cfg
// says otherwise) and shuts it down when the test ends.
func startExecutor(t testing.TB, cfg Config) *Executor {
	t.Helper()
	if cfg.NodeID == "" {
		cfg.NodeID = "e1"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	if cfg.Runtime == "" {
		cfg.Runtime = RuntimeSim
	}
	if cfg.ShimCommand == nil {
		cfg.ShimCommand = []string{testBinary(t), shimArg}
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	e, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, e.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, e.Shutdown(ctx))
	})
	return e
}

// httpClient keeps no idle connections, so tests leave no goroutines.
var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// leader is a fake leader talking to one executor.
type leader struct {
	t     testing.TB
	base  string // executor base URL
	token uint64
	push  string // Leader.Addr
	// cluster is Leader.Cluster.
	cluster string
}

func newLeader(t testing.TB, e *Executor, token uint64) *leader {
	return &leader{t: t, base: "http://" + e.Addr(), token: token}
}

func (l *leader) hdr() wire.Leader {
	return wire.Leader{Version: wire.Version, Cluster: l.cluster, Token: l.token, Node: "m" + strconv.FormatUint(l.token, 10), Addr: l.push}
}

// do sends a request with a raw JSON body and returns the status and body.
func (l *leader) do(method, path string, body []byte) (int, []byte) {
	l.t.Helper()
	code, _, b := l.doType(method, path, "application/json", body)
	return code, b
}

// doType sends a request with a raw body of the given type and returns
// the status, the answer's type and its body.
func (l *leader) doType(method, path, contentType string, body []byte) (int, string, []byte) {
	l.t.Helper()
	return l.doAccept(method, path, contentType, "", body)
}

// doAccept is doType with an Accept header (none when accept is "").
func (l *leader) doAccept(method, path, contentType, accept string, body []byte) (int, string, []byte) {
	l.t.Helper()
	req, err := http.NewRequest(method, l.base+path, bytes.NewReader(body))
	require.NoError(l.t, err)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := httpClient.Do(req)
	require.NoError(l.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(l.t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

func (l *leader) post(path string, v any) (int, []byte) {
	l.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(l.t, err)
	return l.do(http.MethodPost, path, b)
}

func (l *leader) deploy(tasks ...wire.Task) wire.DeployResponse {
	l.t.Helper()
	code, b := l.post(wire.PathDeploy, wire.NewDeployRequest(l.hdr(), tasks))
	require.Equal(l.t, http.StatusOK, code, "deploy: %s", b)
	var resp wire.DeployResponse
	require.NoError(l.t, json.Unmarshal(b, &resp))
	return resp
}

func (l *leader) heartbeat(ack ...string) wire.Report {
	l.t.Helper()
	code, b := l.post(wire.PathHeartbeat, wire.HeartbeatRequest{Leader: l.hdr(), Ack: ack})
	require.Equal(l.t, http.StatusOK, code, "heartbeat: %s", b)
	var rep wire.Report
	require.NoError(l.t, json.Unmarshal(b, &rep))
	return rep
}

// heartbeatAccept sends a heartbeat with an Accept header and returns the
// report, decoded from the format it came in, and that format.
func (l *leader) heartbeatAccept(accept string) (wire.Report, string) {
	l.t.Helper()
	b, err := json.Marshal(wire.HeartbeatRequest{Leader: l.hdr()})
	require.NoError(l.t, err)
	code, ct, body := l.doAccept(http.MethodPost, wire.PathHeartbeat, "application/json", accept, b)
	require.Equal(l.t, http.StatusOK, code, "heartbeat: %s", body)
	var rep wire.Report
	if wire.IsBinary(ct) {
		rep, err = wire.DecodeReport(body)
	} else {
		err = json.Unmarshal(body, &rep)
	}
	require.NoError(l.t, err)
	return rep, ct
}

func (l *leader) cancel(ids ...string) {
	l.t.Helper()
	code, b := l.post(wire.PathCancel, wire.CancelRequest{Leader: l.hdr(), IDs: ids})
	require.Equal(l.t, http.StatusNoContent, code, "cancel: %s", b)
}

// executions reads GET /v1/executions (which renews no lease).
func (l *leader) executions() wire.Executions {
	l.t.Helper()
	code, b := l.do(http.MethodGet, wire.PathExecutions, nil)
	require.Equal(l.t, http.StatusOK, code, "executions: %s", b)
	var ex wire.Executions
	require.NoError(l.t, json.Unmarshal(b, &ex))
	return ex
}

func (l *leader) logs(id, stream string) string {
	l.t.Helper()
	code, b := l.do(http.MethodGet, wire.PathLogs+"?id="+id+"&stream="+stream, nil)
	require.Equal(l.t, http.StatusOK, code, "logs: %s", b)
	return string(b)
}

// logLength reads id's stream at once, with tail, and returns the length
// its answer declares (-1: none) and its body.
func (l *leader) logLength(id, stream string, tail int) (int64, string) {
	l.t.Helper()
	resp, err := httpClient.Get(fmt.Sprintf("%s%s?id=%s&stream=%s&tail=%d", l.base, wire.PathLogs, id, stream, tail))
	require.NoError(l.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(l.t, err)
	require.Equal(l.t, http.StatusOK, resp.StatusCode, "%s", b)
	return resp.ContentLength, string(b)
}

// status finds id in a list of statuses.
func status(execs []wire.ExecutionStatus, id string) (wire.ExecutionStatus, bool) {
	for _, st := range execs {
		if st.ExecutionID == id {
			return st, true
		}
	}
	return wire.ExecutionStatus{}, false
}

// waitState waits until GET /v1/executions shows id in state, and returns it.
func (l *leader) waitState(id string, state wire.State) wire.ExecutionStatus {
	l.t.Helper()
	var st wire.ExecutionStatus
	waitFor(l.t, id+" to be "+string(state), func() bool {
		var ok bool
		st, ok = status(l.executions().Executions, id)
		return ok && st.State == state
	})
	return st
}

// task builds a task of vertex "v" (parallelism 4) of job, subtask sub.
func task(job string, sub, attempt int, command ...string) wire.Task {
	return wire.Task{
		ExecutionID: fmt.Sprintf("%s/v/%d/%d", job, sub, attempt),
		JobID:       job,
		Vertex:      "v",
		Subtask:     sub,
		Parallelism: 4,
		Attempt:     attempt,
		Slot:        sub,
		Command:     command,
	}
}

// simTask builds a sim task that runs for d and exits with code.
func simTask(job string, sub int, d time.Duration, code int) wire.Task {
	t := task(job, sub, 0, "true")
	t.Env = map[string]string{SimDurationEnv: d.String(), SimExitCodeEnv: strconv.Itoa(code)}
	return t
}

// freePort returns a free 127.0.0.1 port (for gossip, which needs a real
// port number up front).
func freePort(t testing.TB) string { return freeport.Must(t) }

// syncBuffer is a bytes.Buffer safe to read while a process writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
