package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"jobmaster/internal/freeport"
	"jobmaster/wire"
)

func TestDeployHeartbeatAck(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{Slots: 4})
	l := newLeader(t, e, 1)

	long := simTask("j", 0, time.Hour, 0)
	done := simTask("j", 1, 0, 0)
	bad := simTask("j", 2, 0, 3)
	resp := l.deploy(long, done, bad)
	require.Len(t, resp.Executions, 3, "every task is acknowledged")
	st, _ := status(resp.Executions, long.ExecutionID)
	require.Equal(t, wire.StateRunning, st.State)
	require.Equal(t, wire.ExecutionStatus{ExecutionID: "j/v/0/0", JobID: "j", Vertex: "v", Subtask: 0, Attempt: 0, Slot: 0, State: wire.StateRunning}, st)

	// The report holds the live task and the ended ones until acked.
	var rep wire.Report
	waitFor(t, "both short tasks to end", func() bool {
		rep = l.heartbeat()
		a, _ := status(rep.Executions, done.ExecutionID)
		b, _ := status(rep.Executions, bad.ExecutionID)
		return a.State == wire.StateFinished && b.State == wire.StateFailed
	})
	require.Equal(t, wire.Version, rep.Version)
	require.Equal(t, "e1", rep.Executor)
	require.Equal(t, e.Instance(), rep.Instance)
	require.EqualValues(t, 1, rep.Token)
	require.Equal(t, 4, rep.Slots)
	require.Equal(t, 1, rep.UsedSlots)
	require.False(t, rep.Partial)
	b, _ := status(rep.Executions, bad.ExecutionID)
	require.Equal(t, "exit status 3", b.Message)

	// Terminal states stay until acked; acks of live ones are ignored.
	rep = l.heartbeat()
	require.Len(t, rep.Executions, 3)
	rep = l.heartbeat(done.ExecutionID, long.ExecutionID, "unknown/v/0/0")
	require.Len(t, rep.Executions, 2)
	_, ok := status(rep.Executions, done.ExecutionID)
	require.False(t, ok, "acked execution is forgotten")
	_, ok = status(rep.Executions, long.ExecutionID)
	require.True(t, ok, "a live execution is not acked away")
	rep = l.heartbeat(bad.ExecutionID)
	require.Len(t, rep.Executions, 1)

	ex := l.executions()
	require.EqualValues(t, 1, ex.FencingToken)
	require.Len(t, ex.Executions, 1)
	require.Equal(t, wire.StateRunning, ex.Executions[0].State)
}

func TestPublicExecutionsShape(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	code, b := l.do(http.MethodGet, wire.PathExecutions, nil)
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"fencing_token":0,"executions":[]}`, string(b))
	l.deploy(simTask("j", 0, time.Hour, 0))
	_, b = l.do(http.MethodGet, wire.PathExecutions, nil)
	require.JSONEq(t, `{"fencing_token":1,"executions":[{"execution_id":"j/v/0/0","job_id":"j","vertex":"v","subtask":0,"attempt":0,"slot":0,"state":"RUNNING"}]}`, string(b))
}

func TestDeployIsIdempotent(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	tk := simTask("j", 0, time.Hour, 0)
	l.deploy(tk)
	before := l.heartbeat()

	again := tk
	again.Slot = 3
	again.Env = map[string]string{SimDurationEnv: "0s"}
	resp := l.deploy(again, again)
	require.Len(t, resp.Executions, 2)
	for _, st := range resp.Executions {
		require.Equal(t, wire.StateRunning, st.State)
		require.Equal(t, 0, st.Slot, "the held execution is reported as it is")
	}
	require.Equal(t, before.Executions, l.heartbeat().Executions)

	// A terminal, unacknowledged execution is not restarted either.
	l.cancel(tk.ExecutionID)
	l.waitState(tk.ExecutionID, wire.StateCanceled)
	resp = l.deploy(tk)
	require.Equal(t, wire.StateCanceled, resp.Executions[0].State)
	require.Equal(t, wire.StateCanceled, l.waitState(tk.ExecutionID, wire.StateCanceled).State)
}

func TestDeployRejectsPerTask(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{Slots: 2})
	l := newLeader(t, e, 1)
	outOfRange := simTask("j", 3, time.Hour, 0) // slot 3 on a 2-slot executor
	badSim := simTask("j", 1, time.Hour, 0)
	badSim.Env[SimDurationEnv] = "soon"
	ok := simTask("j", 0, time.Hour, 0)
	resp := l.deploy(outOfRange, badSim, ok)
	require.Equal(t, wire.StateFailed, resp.Executions[0].State)
	require.Contains(t, resp.Executions[0].Message, "slot 3 out of range")
	require.Equal(t, wire.StateFailed, resp.Executions[1].State)
	require.Contains(t, resp.Executions[1].Message, "SIM_DURATION")
	require.Equal(t, wire.StateRunning, resp.Executions[2].State)
	rep := l.heartbeat()
	require.Len(t, rep.Executions, 3, "failed deployments are reported until acked")
	require.Equal(t, 1, rep.UsedSlots)
}

func TestCancelIsIdempotent(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	tk := simTask("j", 0, time.Hour, 0)
	l.deploy(tk)
	l.cancel(tk.ExecutionID, "unknown/v/0/0")
	st := l.waitState(tk.ExecutionID, wire.StateCanceled)
	require.Equal(t, "canceled by the leader", st.Message)
	l.cancel(tk.ExecutionID) // the leader retries until the report drops it
	l.cancel(tk.ExecutionID)
	rep := l.heartbeat(tk.ExecutionID)
	require.Empty(t, rep.Executions)
	l.cancel(tk.ExecutionID)
	require.Empty(t, l.heartbeat().Executions)
}

func TestStaleTokenIsFencedAndTokenSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Logger: testLogger(t), Runtime: RuntimeSim, NodeID: "e1", HTTPAddr: "127.0.0.1:0"}
	e1, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, e1.Start())

	newer := newLeader(t, e1, 5)
	tk := simTask("j", 0, time.Hour, 0)
	newer.deploy(tk)
	b, err := os.ReadFile(filepath.Join(dir, tokenFile))
	require.NoError(t, err)
	require.Equal(t, "5\n\n", string(b), "the token is on disk")

	older := newLeader(t, e1, 4)
	expectStale := func(l *leader) {
		t.Helper()
		for _, c := range []struct {
			path string
			body any
		}{
			{wire.PathHeartbeat, wire.HeartbeatRequest{Leader: l.hdr(), Ack: []string{tk.ExecutionID}}},
			{wire.PathDeploy, wire.NewDeployRequest(l.hdr(), []wire.Task{simTask("j", 1, 0, 0)})},
			{wire.PathCancel, wire.CancelRequest{Leader: l.hdr(), IDs: []string{tk.ExecutionID}}},
		} {
			code, b := l.post(c.path, c.body)
			require.Equal(t, http.StatusConflict, code, "%s: %s", c.path, b)
			var stale wire.StaleToken
			require.NoError(t, json.Unmarshal(b, &stale))
			require.EqualValues(t, 5, stale.Token)
			require.Contains(t, stale.Error, "stale fencing token 4")
		}
	}
	expectStale(older)
	// Nothing of the stale requests was acted on.
	rep := newer.heartbeat()
	require.Len(t, rep.Executions, 1)
	require.Equal(t, wire.StateRunning, rep.Executions[0].State)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, e1.Shutdown(ctx))

	// Same data dir: the newest token is remembered.
	e2, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, e2.Start())
	t.Cleanup(func() { require.NoError(t, e2.Shutdown(context.Background())) })
	require.NotEqual(t, e1.Instance(), e2.Instance())
	older.base = "http://" + e2.Addr()
	expectStale(older)
	require.EqualValues(t, 5, newLeader(t, e2, 5).executions().FencingToken)
	rep = newLeader(t, e2, 7).heartbeat()
	require.EqualValues(t, 7, rep.Token)
	require.Empty(t, rep.Executions, "tasks do not survive their executor")
	newer.base = older.base
	code, _ := newer.post(wire.PathHeartbeat, wire.HeartbeatRequest{Leader: newer.hdr()})
	require.Equal(t, http.StatusConflict, code, "token 5 is now stale")
}

func TestBadInputGets4xx(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	okHdr := `"version":3,"token":1,"node":"m1","addr":""`
	huge := `{` + okHdr + `,"groups":[{"job_id":"` + strings.Repeat("x", 2<<20) + `"}]}`
	group := func(job string, parallelism int, subtasks string) string {
		return fmt.Sprintf(`{%s,"groups":[{"job_id":%q,"vertex":"x","parallelism":%d,"command":["true"],"subtasks":%s}]}`, okHdr, job, parallelism, subtasks)
	}
	tests := []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"malformed JSON", "POST", wire.PathDeploy, `{"version":3,`, 400, "malformed"},
		{"not an object", "POST", wire.PathHeartbeat, `[1,2]`, 400, "malformed"},
		{"empty body", "POST", wire.PathHeartbeat, ``, 400, "empty"},
		{"wrong type", "POST", wire.PathCancel, `{` + okHdr + `,"ids":"x"}`, 400, "malformed"},
		{"trailing data", "POST", wire.PathHeartbeat, `{` + okHdr + `} {}`, 400, "after the JSON body"},
		{"old version", "POST", wire.PathHeartbeat, `{"version":1,"token":1}`, 400, "version 1: this executor speaks version 3"},
		{"new version", "POST", wire.PathDeploy, `{"version":4,"token":1,"groups":[]}`, 400, "version 4: this executor speaks version 3"},
		{"body over 1 MiB", "POST", wire.PathDeploy, huge, 413, "larger than 1048576"},
		{"path traversal id", "POST", wire.PathDeploy, group("../..", 1, "[0,0,0]"), 400, "execution id"},
		{"dot-dot component", "POST", wire.PathDeploy, group("..", 1, "[0,0,0]"), 400, "not allowed"},
		{"subtask out of range", "POST", wire.PathDeploy, group("j", 2, "[0,0,0, 2,0,1]"), 400, "out of range"},
		{"subtasks not in triples", "POST", wire.PathDeploy, group("j", 2, "[0,0,0, 1,0]"), 400, "not three per task"},
		{"wrong method", "GET", wire.PathDeploy, ``, 405, "use POST"},
		{"wrong method on executions", "POST", wire.PathExecutions, `{}`, 405, "use GET"},
		{"unknown path", "GET", "/v1/nope", ``, 404, "no such endpoint"},
		{"a master's path", "GET", "/v1/jobs", ``, 404, "no such endpoint: /v1/jobs (this is executor e1: the job API is on the masters)"},
		{"logs without id", "GET", wire.PathLogs, ``, 400, "missing"},
		{"logs traversal", "GET", wire.PathLogs + "?id=../../../etc/passwd", ``, 400, "execution id"},
		{"logs encoded traversal", "GET", wire.PathLogs + "?id=%2e%2e/%2e%2e/0/0", ``, 400, "not allowed"},
		{"logs bad stream", "GET", wire.PathLogs + "?id=j/v/0/0&stream=stdin", ``, 400, "stdout or stderr"},
		{"logs bad tail", "GET", wire.PathLogs + "?id=j/v/0/0&tail=-1", ``, 400, "tail"},
		{"logs unknown execution", "GET", wire.PathLogs + "?id=j/v/0/0", ``, 404, "no logs"},
	}
	for _, tc := range tests {
		code, b := l.do(tc.method, tc.path, []byte(tc.body))
		require.Equal(t, tc.code, code, "%s: %s", tc.name, b)
		var ee wire.Error
		require.NoError(t, json.Unmarshal(b, &ee), "%s: error body is JSON: %s", tc.name, b)
		require.Contains(t, ee.Error, tc.want, tc.name)
	}
	require.Empty(t, l.heartbeat().Executions, "nothing was deployed, and the executor still answers")
}

// TestArbitraryBodiesNeverCrash throws random bodies at every leader
// endpoint: the answer is never a 5xx and the executor keeps serving.
func TestArbitraryBodiesNeverCrash(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	fragments := []string{`{`, `}`, `[`, `]`, `"version":3`, `"token":1`, `"groups":[`, `"subtasks":[`, `"ids":[`, `"ack":[`, `"job_id":"j"`,
		`"vertex":"v"`, `"command":["true"]`, `"parallelism":1`, `0,0,0`, `null`, `,`, `:`, `"x"`, `-1`, `1e999`, `"\u0000"`, `"../.."`, `{"env":{"SIM_DURATION":"1h"}}`}
	rapid.Check(t, func(rt *rapid.T) {
		parts := rapid.SliceOfN(rapid.SampledFrom(fragments), 0, 20).Draw(rt, "body")
		path := rapid.SampledFrom([]string{wire.PathDeploy, wire.PathCancel, wire.PathHeartbeat}).Draw(rt, "path")
		code, b := l.do(http.MethodPost, path, []byte(strings.Join(parts, "")))
		if code >= 500 {
			rt.Fatalf("%s answered %d: %s", path, code, b)
		}
	})
	l.heartbeat()
}

// pushRecorder is a fake leader's executor-update endpoint: it takes
// reports as JSON or in binary, as a leader does, and records which.
type pushRecorder struct {
	mu      sync.Mutex
	reports []wire.Report
	binary  []bool
	ack     bool
	// jsonOnly refuses binary reports (415), as a master of an older
	// release does.
	jsonOnly bool
}

func (p *pushRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != wire.PathExecutorUpdate || r.Method != http.MethodPost {
		http.Error(w, "wrong endpoint", http.StatusNotFound)
		return
	}
	var rep wire.Report
	bin := wire.IsReport(r.Header.Get("Content-Type"))
	if wire.IsBinary(r.Header.Get("Content-Type")) && (!bin || p.jsonOnly) {
		http.Error(w, "no such report revision here", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err == nil && bin {
		rep, err = wire.DecodeReport(body)
	} else if err == nil {
		err = json.Unmarshal(body, &rep)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.reports = append(p.reports, rep)
	p.binary = append(p.binary, bin)
	ack := p.ack
	p.mu.Unlock()
	var resp wire.UpdateResponse
	for _, st := range rep.Executions {
		if ack && st.State.Terminal() {
			resp.Ack = append(resp.Ack, st.ExecutionID)
		}
	}
	_ = json.NewEncoder(w).Encode(resp)
}

// latest is the newest pushed status of id.
func (p *pushRecorder) latest(id string) (wire.ExecutionStatus, wire.Report, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.reports) - 1; i >= 0; i-- {
		if st, ok := status(p.reports[i].Executions, id); ok {
			return st, p.reports[i], true
		}
	}
	return wire.ExecutionStatus{}, wire.Report{}, false
}

func TestPushReachesLeaderAndItsAckForgets(t *testing.T) {
	t.Parallel()
	rec := &pushRecorder{ack: true}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 3)
	l.push = strings.TrimPrefix(srv.URL, "http://") // host:port, as masters gossip it

	// bad fails a second after it starts, well after the deploy answer.
	ok, bad, long := simTask("j", 0, 0, 0), simTask("j", 1, time.Second, 2), simTask("j", 2, time.Hour, 0)
	answer := l.deploy(ok, bad, long)
	for _, tk := range []wire.Task{bad, long} {
		st, found := status(answer.Executions, tk.ExecutionID)
		require.True(t, found)
		require.Equal(t, wire.StateRunning, st.State, "the answer carries the state the request reached")
	}
	waitFor(t, "the end of "+ok.ExecutionID+" to be answered or pushed", func() bool {
		if st, _ := status(answer.Executions, ok.ExecutionID); st.State.Terminal() {
			return true
		}
		st, _, found := rec.latest(ok.ExecutionID)
		return found && st.State.Terminal()
	})
	waitFor(t, "push of "+bad.ExecutionID, func() bool {
		st, _, found := rec.latest(bad.ExecutionID)
		return found && st.State.Terminal()
	})
	st, rep, _ := rec.latest(bad.ExecutionID)
	require.Equal(t, wire.StateFailed, st.State)
	require.Equal(t, "exit status 2", st.Message)
	require.True(t, rep.Partial)
	require.Equal(t, "e1", rep.Executor)
	require.Equal(t, e.Instance(), rep.Instance)
	require.EqualValues(t, 3, rep.Token)
	require.Equal(t, wire.Version, rep.Version)
	// What the deploy answer carried is not pushed again: the long task
	// never changed after it.
	_, _, pushed := rec.latest(long.ExecutionID)
	require.False(t, pushed, "RUNNING of the long task was answered and pushed as well")

	// The push's ack removed the ended executions; an end the deploy
	// answer carried was never pushed, and the leader acknowledges it with
	// its next heartbeat, as a real one does.
	var answeredEnds []string
	for _, st := range answer.Executions {
		if st.State.Terminal() {
			answeredEnds = append(answeredEnds, st.ExecutionID)
		}
	}
	l.heartbeat(answeredEnds...)
	waitFor(t, "acked executions to be forgotten", func() bool { return len(l.executions().Executions) == 1 })
	rep2 := l.heartbeat()
	require.Len(t, rep2.Executions, 1)
	require.Equal(t, long.ExecutionID, rep2.Executions[0].ExecutionID)

	// A cancel is pushed too, with its terminal state.
	l.cancel(long.ExecutionID)
	waitFor(t, "push of the cancel", func() bool {
		st, _, _ := rec.latest(long.ExecutionID)
		return st.State == wire.StateCanceled
	})
	waitFor(t, "the executor to be empty", func() bool { return len(l.executions().Executions) == 0 })
}

func TestFailedPushLosesNothing(t *testing.T) {
	t.Parallel()
	deadAddr := freeport.Must(t)

	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	l.push = deadAddr
	// Its end comes from a cancel, so it is pushed (and the push fails),
	// never carried by a deploy answer.
	tk := simTask("j", 0, time.Hour, 0)
	l.deploy(tk)
	l.cancel(tk.ExecutionID)
	l.waitState(tk.ExecutionID, wire.StateCanceled)
	rep := l.heartbeat()
	require.Len(t, rep.Executions, 1, "the heartbeat carries what the push could not")

	// A leader that answers gets the pending change with the next push.
	rec := &pushRecorder{ack: true}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	l.push = strings.TrimPrefix(srv.URL, "http://") // host:port, as masters gossip it
	l.heartbeat()
	// The next change (a cancel: not one a deploy answer carries) is
	// pushed with the one left pending.
	long := simTask("j", 1, time.Hour, 0)
	l.deploy(long)
	l.cancel(long.ExecutionID)
	waitFor(t, "both to be pushed and acked", func() bool { return len(l.executions().Executions) == 0 })
	_, rep, ok := rec.latest(tk.ExecutionID)
	require.True(t, ok, "the pending end was pushed")
	require.True(t, rep.Partial)
}

func TestLeaseExpiryStopsTasks(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{Lease: time.Second})
	l := newLeader(t, e, 1)
	tk := simTask("j", 0, time.Hour, 0)
	l.heartbeat() // a deploy after the lease ran out would be refused
	l.deploy(tk)
	// No more heartbeats: GET /v1/executions is not a leader request.
	st := l.waitState(tk.ExecutionID, wire.StateCanceled)
	require.Regexp(t, `^lease expired: (no heartbeat from a leader for [\d.]+s( \(lease 1s\))?|this executor was held up .*)$`, st.Message)

	// A leader renews the lease; its new tasks run.
	rep := l.heartbeat(tk.ExecutionID)
	require.Empty(t, rep.Executions)
	tk2 := simTask("j", 1, time.Hour, 0)
	require.Equal(t, wire.StateRunning, l.deploy(tk2).Executions[0].State)
}

// TestLeaseCheckedBeforeRenewal: an executor whose clock jumped past the
// lease (it was frozen with SIGSTOP) fences itself on the first request it
// handles, before that request renews the lease. The lease is an hour, so
// the lease loop (every 3 minutes) cannot be the one that notices.
func TestLeaseCheckedBeforeRenewal(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := startExecutor(t, Config{Lease: time.Hour, Now: clock.Now})
	l := newLeader(t, e, 1)
	tk := simTask("j", 0, 10*time.Hour, 0)
	l.deploy(tk)
	clock.Advance(59 * time.Minute)
	rep := l.heartbeat()
	require.Equal(t, wire.StateRunning, rep.Executions[0].State, "within the lease")

	clock.Advance(61 * time.Minute) // 61 minutes since the last heartbeat
	rep = l.heartbeat()
	require.Equal(t, wire.StateCanceling, rep.Executions[0].State, "fenced before the heartbeat renewed the lease")
	st := l.waitState(tk.ExecutionID, wire.StateCanceled)
	require.Equal(t, "lease expired: no heartbeat from a leader for 1h1m0s (lease 1h0m0s)", st.Message, "the silence as it was")

	// That heartbeat renewed the lease: new work is not fenced.
	tk2 := simTask("j", 1, 10*time.Hour, 0)
	l.deploy(tk2)
	clock.Advance(30 * time.Minute)
	rep = l.heartbeat(tk.ExecutionID)
	require.Len(t, rep.Executions, 1)
	require.Equal(t, wire.StateRunning, rep.Executions[0].State)
}

func TestLeaderRequestsDuringShutdownAre503(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	e.mu.Lock()
	e.phase = phaseClosing
	e.mu.Unlock()
	code, b := l.post(wire.PathDeploy, wire.NewDeployRequest(l.hdr(), []wire.Task{simTask("j", 0, 0, 0)}))
	require.Equal(t, http.StatusServiceUnavailable, code, "%s", b)
	require.Contains(t, string(b), "shutting down")
	e.mu.Lock()
	e.phase = phaseRunning
	e.mu.Unlock()
	require.Empty(t, l.heartbeat().Executions)
}

func TestLogsOfSimTaskAreEmpty(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	tk := simTask("j", 0, time.Hour, 0)
	l.deploy(tk)
	require.Equal(t, "", l.logs(tk.ExecutionID, "stdout"))
	// Read at once, its length is said, as of every log: a master relays
	// only an answer whose end it can check.
	n, body := l.logLength(tk.ExecutionID, "stdout", 100)
	require.Zero(t, n)
	require.Empty(t, body)
}

func TestConfigValidation(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no node id":    {DataDir: "/tmp/x", HTTPAddr: ":0"},
		"no data dir":   {NodeID: "e", HTTPAddr: ":0"},
		"no http addr":  {NodeID: "e", DataDir: "/tmp/x"},
		"bad runtime":   {NodeID: "e", DataDir: "/tmp/x", HTTPAddr: ":0", Runtime: "docker"},
		"bad slots":     {NodeID: "e", DataDir: "/tmp/x", HTTPAddr: ":0", Slots: -1},
		"bad lease":     {NodeID: "e", DataDir: "/tmp/x", HTTPAddr: ":0", Lease: -time.Second},
		"bad grace":     {NodeID: "e", DataDir: "/tmp/x", HTTPAddr: ":0", CancelGrace: -time.Second},
		"several wrong": {Runtime: "x"},
	} {
		_, err := New(cfg)
		require.Error(t, err, name)
	}
	cfg, err := Config{NodeID: "e", DataDir: "/tmp/x", HTTPAddr: ":0"}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultSlots, cfg.Slots)
	require.Equal(t, RuntimeExec, cfg.Runtime)
	require.Equal(t, DefaultLease, cfg.Lease)
	require.Equal(t, DefaultCancelGrace, cfg.CancelGrace)
	require.Equal(t, "shim", cfg.ShimCommand[1])
}

func TestStartTwiceAndShutdownUnstarted(t *testing.T) {
	e, err := New(Config{NodeID: "e", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Runtime: RuntimeSim})
	require.NoError(t, err)
	require.NoError(t, e.Shutdown(context.Background()))
	e = startExecutor(t, Config{})
	require.Error(t, e.Start())
}

func TestAdvertiseAddr(t *testing.T) {
	require.Equal(t, "127.0.0.1:80", advertiseAddr("127.0.0.1:80", "127.0.0.1:7946"))
	require.Equal(t, "10.0.0.5:80", advertiseAddr("0.0.0.0:80", "10.0.0.5:7946"))
	adv := advertiseAddr("[::]:80", "0.0.0.0:7946")
	require.NotContains(t, adv, "::]", "an unspecified host is never advertised")
}

// TestProbeDoesNotRenewTheLease: a leader that has not heard this executor's
// answers for a while probes it; the probe is answered but renews nothing,
// so the lease runs out on time even if every request gets through.
func TestProbeDoesNotRenewTheLease(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := startExecutor(t, Config{Lease: time.Hour, Now: clock.Now})
	l := newLeader(t, e, 1)
	tk := simTask("j", 0, 10*time.Hour, 0)
	l.deploy(tk)
	probe := func() wire.Report {
		code, b := l.post(wire.PathHeartbeat, wire.HeartbeatRequest{Leader: l.hdr(), Probe: true})
		require.Equal(t, http.StatusOK, code, "%s", b)
		var rep wire.Report
		require.NoError(t, json.Unmarshal(b, &rep))
		return rep
	}
	clock.Advance(40 * time.Minute)
	rep := probe()
	require.Equal(t, wire.StateRunning, rep.Executions[0].State, "a probe is answered with the report")
	require.Equal(t, time.Hour.Milliseconds(), rep.LeaseMs)
	clock.Advance(40 * time.Minute) // 80 minutes since the last renewal
	rep = probe()
	require.Equal(t, wire.StateCanceling, rep.Executions[0].State, "probes did not renew the lease")
}

// TestANewClusterFencesTheOldOneOff: a cluster restored from a snapshot
// (or formed afresh) starts its tokens over; the executor follows it, and
// the old cluster's leaders are refused for good, whatever their token.
func TestANewClusterFencesTheOldOneOff(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	old := newLeader(t, e, 40)
	old.cluster = "old"
	old.heartbeat()
	fresh := newLeader(t, e, 3)
	fresh.cluster = "new"
	rep := fresh.heartbeat()
	require.EqualValues(t, 3, rep.Token)
	old.token = 99
	code, b := old.post(wire.PathHeartbeat, wire.HeartbeatRequest{Leader: old.hdr()})
	require.Equal(t, http.StatusConflict, code, "%s", b)
	require.Contains(t, string(b), "cluster old has been replaced by cluster new")
}

func TestLeaderRequestsMayCarryFieldsThisVersionDoesNotKnow(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	body := `{"version":3,"token":1,"node":"m1","from_a_newer_leader":true,"groups":[]}`
	code, b := l.do(http.MethodPost, wire.PathDeploy, []byte(body))
	require.Equal(t, http.StatusOK, code, "%s", b)
}

// A state only a deploy answer carried (the answer may have been lost) is
// in the final push at shutdown, when no heartbeat will ask again.
func TestShutdownPushesWhatOnlyAnAnswerCarried(t *testing.T) {
	t.Parallel()
	rec := &pushRecorder{} // acknowledges nothing: the executor keeps every end
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	l.push = strings.TrimPrefix(srv.URL, "http://") // host:port, as masters gossip it
	bad := simTask("j", 0, 0, 0)
	bad.Slot = 99 // fails to start, inside the deploy request
	answer := l.deploy(bad)
	st, ok := status(answer.Executions, bad.ExecutionID)
	require.True(t, ok)
	require.Equal(t, wire.StateFailed, st.State)
	_, _, pushed := rec.latest(bad.ExecutionID)
	require.False(t, pushed, "the answer carried it")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.Shutdown(ctx))
	st, _, pushed = rec.latest(bad.ExecutionID)
	require.True(t, pushed, "the final push carries it")
	require.Equal(t, wire.StateFailed, st.State)
}

// A deploy that arrives after its execution ended and was acknowledged (a
// redeploy that raced the first) does not run it again.
func TestLateRedeployDoesNotRunAgain(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	tk := simTask("j", 0, 0, 0)
	l.deploy(tk)
	l.waitState(tk.ExecutionID, wire.StateFinished)
	l.heartbeat(tk.ExecutionID) // the leader recorded the end: forgotten
	require.Empty(t, l.executions().Executions)

	answer := l.deploy(tk)
	st, ok := status(answer.Executions, tk.ExecutionID)
	require.True(t, ok)
	require.Equal(t, wire.StateFinished, st.State, "the answer gives its last status")
	require.Empty(t, l.executions().Executions, "it is not held, so not running, again")
}

// TestALateDeployAfterTheLeaseRanOutStartsNothing: a deploy read after the
// lease ran out (it waited through a freeze, say) is refused until a
// heartbeat renews the lease: the leader may already have failed its tasks
// and started them elsewhere.
func TestALateDeployAfterTheLeaseRanOutStartsNothing(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := startExecutor(t, Config{Lease: time.Hour, Now: clock.Now})
	l := newLeader(t, e, 1)
	l.heartbeat()
	clock.Advance(61 * time.Minute)
	late := simTask("j", 0, 10*time.Hour, 0)
	code, b := l.post(wire.PathDeploy, wire.NewDeployRequest(l.hdr(), []wire.Task{late}))
	require.Equal(t, http.StatusServiceUnavailable, code, "%s", b)
	require.Contains(t, string(b), "lease ran out")
	require.Empty(t, l.executions().Executions, "nothing was started or registered")

	// A heartbeat renews the lease; the reconciler's resend then runs.
	l.heartbeat()
	require.Equal(t, wire.StateRunning, l.deploy(late).Executions[0].State)
}

// A deploy in binary runs its tasks as the same deploy in JSON does, and
// is answered in binary; a malformed or oversized one gets the 4xx a JSON
// one would, as JSON, and deploys nothing.
func TestDeployInBinary(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	req := wire.NewDeployRequest(l.hdr(), []wire.Task{simTask("bin", 0, time.Hour, 0), simTask("bin", 1, time.Hour, 0)})
	code, ct, b := l.doType(http.MethodPost, wire.PathDeploy, wire.DeployType, wire.AppendDeploy(nil, &req))
	require.Equal(t, http.StatusOK, code, "%s", b)
	require.Equal(t, wire.DeployType, ct)
	resp, err := wire.DecodeDeployResponse(b)
	require.NoError(t, err)
	require.Len(t, resp.Executions, 2)
	for _, x := range resp.Executions {
		require.Equal(t, "bin", x.JobID)
		require.Contains(t, []wire.State{wire.StateDeploying, wire.StateRunning}, x.State, "%+v", x)
	}
	require.Equal(t, resp.Executions, l.deploy(simTask("bin", 0, time.Hour, 0), simTask("bin", 1, time.Hour, 0)).Executions,
		"the same deploy again as JSON: the same executions, already held")

	stale := wire.NewDeployRequest(wire.Leader{Version: 2, Token: 1, Node: "m1"}, []wire.Task{simTask("old", 0, time.Hour, 0)})
	cut := wire.AppendDeploy(nil, &req)
	tests := []struct {
		name string
		body []byte
		code int
		want string
	}{
		{"cut short", cut[:len(cut)-3], 400, "malformed binary body"},
		{"a JSON body labelled binary", []byte(`{"version":3}`), 400, "malformed binary body"},
		{"old version", wire.AppendDeploy(nil, &stale), 400, "version 2: this executor speaks version 3"},
		// Just over: the server drains what little follows the limit after
		// its 413, so the client reads the answer rather than a reset.
		{"over 1 MiB", make([]byte, 1<<20+1024), 413, "larger than 1048576"},
	}
	for _, tc := range tests {
		code, ct, b := l.doType(http.MethodPost, wire.PathDeploy, wire.BinaryType, tc.body)
		require.Equal(t, tc.code, code, "%s: %s", tc.name, b)
		require.Contains(t, ct, "application/json", tc.name)
		var ee wire.Error
		require.NoError(t, json.Unmarshal(b, &ee), "%s: error body is JSON: %s", tc.name, b)
		require.Contains(t, ee.Error, tc.want, tc.name)
	}
	// A binary deploy without a revision is of the first (a leader of the
	// release before revisions sends it so); one of a revision this
	// executor does not read is refused, and nothing of it deployed.
	code, ct, b = l.doType(http.MethodPost, wire.PathDeploy, wire.BinaryType, wire.AppendDeploy(nil, &req))
	require.Equal(t, http.StatusOK, code, "%s", b)
	require.Equal(t, wire.DeployType, ct)
	other := wire.NewDeployRequest(l.hdr(), []wire.Task{simTask("other", 0, time.Hour, 0)})
	code, _, b = l.doType(http.MethodPost, wire.PathDeploy, "application/octet-stream; deploy=2", wire.AppendDeploy(nil, &other))
	require.Equal(t, http.StatusUnsupportedMediaType, code, "%s", b)
	require.Contains(t, string(b), "send JSON")
	// Only a deploy takes binary.
	code, _, b = l.doType(http.MethodPost, wire.PathHeartbeat, wire.BinaryType, []byte{0xD1})
	require.Equal(t, http.StatusUnsupportedMediaType, code, "%s", b)
	require.Len(t, l.heartbeat().Executions, 2, "nothing else was deployed")
}

// A leader that asks for its heartbeat's answer in binary gets it so, the
// same report as JSON, and from then on the executor's pushes to it are in
// binary; a new leader gets JSON pushes until its own heartbeat asks.
func TestReportsInBinaryWhenTheLeaderAsks(t *testing.T) {
	t.Parallel()
	recs := []*pushRecorder{{ack: true}, {ack: true}}
	var addrs []string
	for _, rec := range recs {
		srv := httptest.NewServer(rec)
		t.Cleanup(srv.Close)
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 3)
	l.push = addrs[0]
	long := simTask("j", 0, time.Hour, 0)
	l.deploy(long)

	asJSON := l.heartbeat()
	rep, ct := l.heartbeatAccept(wire.AcceptReport)
	require.Equal(t, wire.ReportType, ct)
	require.Equal(t, asJSON, rep, "the same report in either format")
	_, ct = l.heartbeatAccept("application/octet-stream; report=99")
	require.Contains(t, ct, "application/json", "a revision the executor does not write: JSON")
	_, ct = l.heartbeatAccept("application/json")
	require.Contains(t, ct, "application/json")

	// pushedAs deploys tk through ld and cancels it, waits for the push of
	// its end to rec, and says whether it came in binary. (A task that
	// ended by itself at once could end while its deploy is answered, and
	// its end then travels in the answer alone.)
	pushedAs := func(ld *leader, rec *pushRecorder, tk wire.Task) bool {
		t.Helper()
		ld.deploy(tk)
		ld.cancel(tk.ExecutionID)
		var bin bool
		waitFor(t, "the push of "+tk.ExecutionID, func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for i, r := range rec.reports {
				if st, ok := status(r.Executions, tk.ExecutionID); ok && st.State.Terminal() {
					bin = rec.binary[i]
					return true
				}
			}
			return false
		})
		return bin
	}
	// The last heartbeat asked for JSON: the leader takes JSON.
	require.False(t, pushedAs(l, recs[0], simTask("j", 1, time.Hour, 0)), "pushed in binary to a leader whose last heartbeat asked for JSON")

	l.heartbeatAccept(wire.AcceptReport)
	ends := simTask("j", 2, time.Hour, 0)
	require.True(t, pushedAs(l, recs[0], ends), "pushed as JSON to a leader that asked for binary")
	st, r, _ := recs[0].latest(ends.ExecutionID)
	require.Equal(t, wire.StateCanceled, st.State)
	require.Equal(t, e.Instance(), r.Instance)
	require.True(t, r.Partial)

	// A new leader at another address: JSON until it asks.
	l2 := newLeader(t, e, 4)
	l2.push = addrs[1]
	require.False(t, pushedAs(l2, recs[1], simTask("j", 3, time.Hour, 0)), "pushed in binary to a new leader before it asked")
	l2.heartbeatAccept(wire.AcceptReport)
	require.True(t, pushedAs(l2, recs[1], simTask("k", 0, time.Hour, 0)), "pushed as JSON to a new leader that asked for binary")

	// A newer term at the same address (an older release took over, say):
	// its deploy, without a heartbeat, brings JSON back.
	l3 := newLeader(t, e, 5)
	l3.push = addrs[1]
	require.False(t, pushedAs(l3, recs[1], simTask("k", 1, time.Hour, 0)), "pushed in binary to a new term that has not asked")

	// A leader that asked for binary but refuses it (415: a relay to a
	// master of an older release): the push goes again as JSON at once,
	// and later ones as JSON too.
	l3.heartbeatAccept(wire.AcceptReport)
	recs[1].mu.Lock()
	recs[1].jsonOnly = true
	recs[1].mu.Unlock()
	require.False(t, pushedAs(l3, recs[1], simTask("k", 2, time.Hour, 0)), "the push refused in binary did not arrive as JSON")
	require.False(t, pushedAs(l3, recs[1], simTask("k", 3, time.Hour, 0)))
}

// A leader's request that names another executor (wire.HeaderExecutor)
// gets 421 and changes nothing: gossip gave that name this executor's
// address. One that names this executor, or none, is taken.
func TestRequestForAnotherExecutorIsMisdirected(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{Slots: 2})
	l := newLeader(t, e, 1)
	tk := simTask("j", 0, time.Hour, 0)
	l.deploy(tk)
	send := func(path string, v any, to string) (int, string) {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, l.base+path, bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(wire.HeaderExecutor, to)
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := send(wire.PathCancel, wire.CancelRequest{Leader: l.hdr(), IDs: []string{tk.ExecutionID}}, "e9")
	require.Equal(t, http.StatusMisdirectedRequest, code)
	require.Contains(t, body, "this is executor e1, not e9")
	code, _ = send(wire.PathDeploy, wire.NewDeployRequest(l.hdr(), []wire.Task{simTask("j", 1, time.Hour, 0)}), "e9")
	require.Equal(t, http.StatusMisdirectedRequest, code)
	code, _ = send(wire.PathHeartbeat, wire.HeartbeatRequest{Leader: l.hdr()}, "e9")
	require.Equal(t, http.StatusMisdirectedRequest, code)
	rep := l.heartbeat()
	require.Len(t, rep.Executions, 1, "a misdirected deploy started a task")
	require.Equal(t, wire.StateRunning, rep.Executions[0].State, "a misdirected cancel stopped a task")

	code, body = send(wire.PathCancel, wire.CancelRequest{Leader: l.hdr(), IDs: []string{tk.ExecutionID}}, "e1")
	require.Equal(t, http.StatusNoContent, code, body)
	l.waitState(tk.ExecutionID, wire.StateCanceled)
}

// Two executors never share a data directory: the second is refused
// before it reads or sweeps anything there, until the first stops.
func TestDataDirectoryOfOneExecutorOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := New(Config{NodeID: "e1", DataDir: dir, HTTPAddr: "127.0.0.1:0", Runtime: RuntimeSim, Logger: testLogger(t)})
	require.NoError(t, err)
	_, err = New(Config{NodeID: "e2", DataDir: dir, HTTPAddr: "127.0.0.1:0", Runtime: RuntimeSim, Logger: testLogger(t)})
	require.ErrorContains(t, err, "is in use by another executor")
	require.NoError(t, first.Shutdown(context.Background()))
	second, err := New(Config{NodeID: "e1", DataDir: dir, HTTPAddr: "127.0.0.1:0", Runtime: RuntimeSim, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, second.Shutdown(context.Background()))
}
