package executor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

func startExecExecutor(t *testing.T, cfg Config) (*Executor, *leader) {
	cfg.Runtime = RuntimeExec
	if cfg.CancelGrace == 0 {
		cfg.CancelGrace = 2 * time.Second
	}
	e := startExecutor(t, cfg)
	return e, newLeader(t, e, 1)
}

func TestExecExitCodes(t *testing.T) {
	t.Parallel()
	e, l := startExecExecutor(t, Config{})
	ok := task("codes", 0, 0, "sh", "-c", "exit 0")
	fail := task("codes", 1, 0, "sh", "-c", "exit 3")
	killed := task("codes", 2, 0, "sh", "-c", "kill -9 $$")
	missing := task("codes", 3, 0, "no-such-command-jobmaster")
	relative := task("codes", 0, 1, "./not-here")
	resp := l.deploy(ok, fail, killed, missing, relative)
	require.Len(t, resp.Executions, 5)
	for i, want := range []wire.State{wire.StateRunning, wire.StateRunning, wire.StateRunning, wire.StateFailed, wire.StateFailed} {
		if want == wire.StateRunning && resp.Executions[i].State.Terminal() {
			continue // it may already have ended
		}
		require.Equal(t, want, resp.Executions[i].State, resp.Executions[i].ExecutionID)
	}
	require.Equal(t, "command not found: no-such-command-jobmaster", resp.Executions[3].Message)
	require.Contains(t, resp.Executions[4].Message, "command not found")

	require.Equal(t, "", l.waitState(ok.ExecutionID, wire.StateFinished).Message)
	require.Equal(t, "exit status 3", l.waitState(fail.ExecutionID, wire.StateFailed).Message)
	require.Equal(t, "exit status 137", l.waitState(killed.ExecutionID, wire.StateFailed).Message)

	// Every execution has its working directory with its logs.
	for _, tk := range []wire.Task{ok, fail, killed} {
		for _, f := range []string{"stdout.log", "stderr.log"} {
			_, err := os.Stat(filepath.Join(e.cfg.DataDir, "executions", tk.ExecutionID, f))
			require.NoError(t, err)
		}
	}
}

func TestExecEnvironmentAndLogs(t *testing.T) {
	t.Parallel()
	e, l := startExecExecutor(t, Config{NodeID: "exec-7"})
	tk := task("envjob", 2, 1, "sh", "-c", "pwd; env; echo to-stderr >&2")
	tk.Env = map[string]string{"GREETING": "hello world", "JOBMASTER_SUBTASK": "spoofed"}
	l.deploy(tk)
	l.waitState(tk.ExecutionID, wire.StateFinished)

	out := l.logs(tk.ExecutionID, "stdout")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	n, tail := l.logLength(tk.ExecutionID, "stdout", 5)
	require.Equal(t, int64(5), n, "a log read at once says its length")
	require.Equal(t, out[len(out)-5:], tail)
	wd, err := filepath.EvalSymlinks(filepath.Join(e.cfg.DataDir, "executions", "envjob", "v", "2", "1"))
	require.NoError(t, err)
	require.Equal(t, wd, lines[0], "the working directory is the execution's")
	root, err := filepath.EvalSymlinks(e.cfg.DataDir)
	require.NoError(t, err)
	for d := wd; d != root && d != filepath.Dir(d); d = filepath.Dir(d) {
		st, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "%s is its owner's alone", d)
	}
	env := map[string][]string{}
	for _, kv := range lines[1:] {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = append(env[k], v)
	}
	want := map[string]string{
		"JOBMASTER_JOB_ID":       "envjob",
		"JOBMASTER_VERTEX":       "v",
		"JOBMASTER_SUBTASK":      "2",
		"JOBMASTER_PARALLELISM":  "4",
		"JOBMASTER_ATTEMPT":      "1",
		"JOBMASTER_EXECUTION_ID": "envjob/v/2/1",
		"JOBMASTER_EXECUTOR_ID":  "exec-7",
		"GREETING":               "hello world",
	}
	for k, v := range want {
		require.Equal(t, []string{v}, env[k], k)
	}
	// Exactly those JOBMASTER_ variables, plus any the executor itself has.
	var got, expect []string
	for k := range env {
		if strings.HasPrefix(k, "JOBMASTER_") {
			got = append(got, k)
		}
	}
	for k := range want {
		if strings.HasPrefix(k, "JOBMASTER_") {
			expect = append(expect, k)
		}
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "JOBMASTER_") {
			if _, ok := want[k]; !ok {
				expect = append(expect, k)
			}
		}
	}
	sort.Strings(got)
	sort.Strings(expect)
	require.Equal(t, expect, got)
	// The executor's own environment is passed on.
	require.Equal(t, []string{os.Getenv("PATH")}, env["PATH"])

	require.Equal(t, "to-stderr\n", l.logs(tk.ExecutionID, "stderr"))
	code, b := l.do(http.MethodGet, wire.PathLogs+"?id="+tk.ExecutionID+"&stream=stderr&tail=7", nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "stderr\n", string(b))
	code, b = l.do(http.MethodGet, wire.PathLogs+"?id="+tk.ExecutionID+"&tail=0", nil)
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, b)

	// Logs stay readable after the execution is acknowledged.
	l.heartbeat(tk.ExecutionID)
	require.Equal(t, "to-stderr\n", l.logs(tk.ExecutionID, "stderr"))
}

func TestExecCancelKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	_, l := startExecExecutor(t, Config{})
	tk := task("cancel", 0, 0, "sh", "-c", "echo $$; sleep 300 & exec sleep 300")
	require.Equal(t, wire.StateRunning, l.deploy(tk).Executions[0].State)
	pid := l.firstLinePID(tk.ExecutionID)
	pgid := pgidOf(t, pid)
	require.NotEqual(t, pgidOf(t, os.Getpid()), pgid, "the task has its own process group")
	waitFor(t, "shim, task and its child", func() bool { return len(groupMembers(pgid)) == 3 })

	l.cancel(tk.ExecutionID)
	rep := l.heartbeat()
	require.Contains(t, []wire.State{wire.StateCanceling, wire.StateCanceled}, rep.Executions[0].State)
	st := l.waitState(tk.ExecutionID, wire.StateCanceled)
	require.Equal(t, "canceled by the leader", st.Message)
	waitFor(t, "the process group to be gone", func() bool { return len(groupMembers(pgid)) == 0 })
}

// TestExecCancelEscalatesToSIGKILL: a task that ignores SIGTERM is killed by
// the shim after the grace period.
func TestExecCancelEscalatesToSIGKILL(t *testing.T) {
	t.Parallel()
	_, l := startExecExecutor(t, Config{CancelGrace: 300 * time.Millisecond})
	tk := task("stubborn", 0, 0, "sh", "-c", `trap "" TERM; echo $$; sleep 300; sleep 300`)
	l.deploy(tk)
	pgid := pgidOf(t, l.firstLinePID(tk.ExecutionID))
	l.cancel(tk.ExecutionID)
	l.waitState(tk.ExecutionID, wire.StateCanceled)
	waitFor(t, "the process group to be gone", func() bool { return len(groupMembers(pgid)) == 0 })
	require.Contains(t, l.logs(tk.ExecutionID, "stderr"), "did not exit 300ms after SIGTERM")
}

// TestExecutorKillsGroupIfShimHangs: if the shim itself does not stop, the
// executor SIGKILLs the whole group grace+2s after the cancel.
func TestExecutorKillsGroupIfShimHangs(t *testing.T) {
	t.Parallel()
	// A "shim" that ignores SIGTERM and never runs the command.
	hung := []string{"sh", "-c", `trap "" TERM; echo $$; sleep 300; sleep 300`, "hung-shim"}
	_, l := startExecExecutor(t, Config{CancelGrace: 100 * time.Millisecond, ShimCommand: hung})
	tk := task("hung", 0, 0, "true")
	l.deploy(tk)
	pgid := pgidOf(t, l.firstLinePID(tk.ExecutionID))
	l.cancel(tk.ExecutionID)
	l.waitState(tk.ExecutionID, wire.StateCanceled)
	waitFor(t, "the process group to be gone", func() bool { return len(groupMembers(pgid)) == 0 })
}

// TestExecLeftoversDieWithTheTask: children a task leaves behind when it
// exits are killed with it.
func TestExecLeftoversDieWithTheTask(t *testing.T) {
	t.Parallel()
	_, l := startExecExecutor(t, Config{})
	tk := task("leftover", 0, 0, "sh", "-c", "echo $$; sleep 300 & read x < /dev/null; sleep 0.2")
	l.deploy(tk)
	pgid := pgidOf(t, l.firstLinePID(tk.ExecutionID))
	l.waitState(tk.ExecutionID, wire.StateFinished)
	waitFor(t, "the background sleep to be killed", func() bool { return len(groupMembers(pgid)) == 0 })
}

func TestExecLeaseExpiryStopsProcesses(t *testing.T) {
	t.Parallel()
	_, l := startExecExecutor(t, Config{Lease: 1500 * time.Millisecond, CancelGrace: 200 * time.Millisecond})
	tk := task("lease", 0, 0, "sh", "-c", "echo $$; exec sleep 300")
	l.heartbeat() // a deploy after the lease ran out would be refused
	l.deploy(tk)
	// The lease is kept until the task runs (starting it can take longer
	// than the lease on a loaded machine); then the leader falls silent.
	var pid int
	waitFor(t, tk.ExecutionID+" to print its pid", func() bool {
		var ok bool
		if pid, ok = l.printedPID(tk.ExecutionID); ok {
			return true
		}
		l.heartbeat()
		return false
	})
	pgid := pgidOf(t, pid)
	st := l.waitState(tk.ExecutionID, wire.StateCanceled)
	require.Regexp(t, `^lease (expiring|expired): (no heartbeat from a leader for [\d.]+m?s \(lease 1.5s\)|this executor was held up .*)$`, st.Message)
	waitFor(t, "the process group to be gone", func() bool { return len(groupMembers(pgid)) == 0 })
}

func TestShutdownStopsEveryTask(t *testing.T) {
	t.Parallel()
	rec := &pushRecorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	e, err := New(Config{NodeID: "e1", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Logger: testLogger(t),
		ShimCommand: []string{testBinary(t), shimArg}, CancelGrace: 2 * time.Second})
	require.NoError(t, err)
	require.NoError(t, e.Start())
	l := newLeader(t, e, 1)
	l.push = strings.TrimPrefix(srv.URL, "http://") // host:port, as masters gossip it
	a := task("down", 0, 0, "sh", "-c", "echo $$; exec sleep 300")
	b := task("down", 1, 0, "sh", "-c", "echo $$; exec sleep 300")
	l.deploy(a, b)
	pids := []int{l.firstLinePID(a.ExecutionID), l.firstLinePID(b.ExecutionID)}
	pgids := []int{pgidOf(t, pids[0]), pgidOf(t, pids[1])}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, e.Shutdown(ctx))
	for _, pid := range pids {
		p, ok := readProc(pid)
		require.True(t, !ok || p.state == "Z", "task %d is dead when Shutdown returns", pid)
	}
	for _, pgid := range pgids {
		waitFor(t, "the process group to be gone", func() bool { return len(groupMembers(pgid)) == 0 })
	}
	for _, tk := range []wire.Task{a, b} {
		st, _, ok := rec.latest(tk.ExecutionID)
		require.True(t, ok)
		require.Equal(t, wire.StateCanceled, st.State, "the final state was pushed")
		require.Equal(t, "executor shutting down", st.Message)
	}
	_, err = httpClient.Get(l.base + wire.PathExecutions)
	require.Error(t, err, "HTTP has stopped")
	require.NoError(t, e.Shutdown(ctx), "a second Shutdown is a no-op")
}

func TestShutdownDeadlineKillsTasks(t *testing.T) {
	t.Parallel()
	e, err := New(Config{NodeID: "e1", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Logger: testLogger(t),
		ShimCommand: []string{testBinary(t), shimArg}, CancelGrace: time.Minute, Lease: 2 * time.Minute})
	require.NoError(t, err)
	require.NoError(t, e.Start())
	l := newLeader(t, e, 1)
	tk := task("deadline", 0, 0, "sh", "-c", `trap "" TERM; echo $$; sleep 300; sleep 300`)
	l.deploy(tk)
	pid := l.firstLinePID(tk.ExecutionID)
	pgid := pgidOf(t, pid)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, e.Shutdown(ctx), context.DeadlineExceeded)
	p, ok := readProc(pid)
	require.True(t, !ok || p.state == "Z", "task is dead when Shutdown returns")
	waitFor(t, "the process group to be gone", func() bool { return len(groupMembers(pgid)) == 0 })
}

func TestCrashStopsNetworkAndTasks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{NodeID: "e1", DataDir: dir, HTTPAddr: "127.0.0.1:0", Logger: testLogger(t),
		ShimCommand: []string{testBinary(t), shimArg}}
	e, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, e.Start())
	l := newLeader(t, e, 9)
	tk := task("crash", 0, 0, "sh", "-c", "echo $$; exec sleep 300")
	l.deploy(tk)
	pgid := pgidOf(t, l.firstLinePID(tk.ExecutionID))

	e.Crash()
	_, err = httpClient.Get(l.base + wire.PathExecutions)
	require.Error(t, err, "HTTP is gone")
	waitFor(t, "the process group to be gone", func() bool { return len(groupMembers(pgid)) == 0 })
	require.NoError(t, e.Shutdown(context.Background()))
	e.Crash()

	// A new executor on the same data dir remembers the token.
	e2 := startExecutor(t, Config{DataDir: dir, Runtime: RuntimeExec})
	require.EqualValues(t, 9, newLeader(t, e2, 0).executions().FencingToken)
}

// A relative --data-dir names the same place for the tasks, which run in
// directories of their own: it is made absolute when the executor starts.
func TestARelativeDataDirWorks(t *testing.T) {
	t.Chdir(t.TempDir())
	e, l := startExecExecutor(t, Config{DataDir: filepath.Join("data", "e1")})
	require.True(t, filepath.IsAbs(e.cfg.DataDir), e.cfg.DataDir)
	hello := task("rel", 0, 0, "sh", "-c", "echo hello")
	l.deploy(hello)
	require.Equal(t, "", l.waitState(hello.ExecutionID, wire.StateFinished).Message)
}
