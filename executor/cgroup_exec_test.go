package executor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// memoryCgroups is e's cgroups, or skips the test when the host offers
// no writable cgroup memory controller.
func memoryCgroups(t *testing.T, e *Executor) *cgroups {
	t.Helper()
	cg := e.rt.(*execRuntime).cg
	if !cg.layout.has("memory") {
		t.Skipf("this host offers no writable cgroup memory controller, so task memory cannot be enforced here: %s", cg.why)
	}
	return cg
}

// cgroupDirOf is execution id's cgroup directory for controller (v1) or
// its only one (v2).
func cgroupDirOf(cg *cgroups, id, controller string) string {
	for _, c := range cg.childDirs(id) {
		if c.Controller == "" || c.Controller == controller {
			return c.Dir
		}
	}
	return ""
}

func cgroupPIDs(t *testing.T, dir string) []int {
	t.Helper()
	s, err := readBounded(filepath.Join(dir, "cgroup.procs"), maxCgroupFile)
	require.NoError(t, err)
	var out []int
	for _, f := range strings.Fields(s) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		out = append(out, pid)
	}
	return out
}

// TestExecOutOfMemoryFailsOnlyThatTask: a task that allocates past its
// memory_mb is killed and FAILED "out of memory", while its neighbour on
// the same executor, in a cgroup of its own with the same limit, runs on.
// The task's process is in its cgroup and its shim is not; every cgroup is
// gone once its task has ended, and the executor's own with its last task.
func TestExecOutOfMemoryFailsOnlyThatTask(t *testing.T) {
	t.Parallel()
	var parents []cgroupParent
	t.Cleanup(func() { // runs after the executor's Shutdown
		for _, p := range parents {
			_, err := os.Stat(p.Dir)
			require.ErrorIs(t, err, os.ErrNotExist, "the executor's cgroup %s outlives it", p.Dir)
		}
	})
	e, l := startExecExecutor(t, Config{})
	cg := memoryCgroups(t, e)
	parents = cg.layout.Parents

	neighbour := task("oom", 1, 0, "sh", "-c", "echo $$; exec sleep 300")
	neighbour.Resources = wire.Resources{MemoryMB: 32, CPUMillis: 250}
	require.Equal(t, wire.StateRunning, l.deploy(neighbour).Executions[0].State)
	pid := l.firstLinePID(neighbour.ExecutionID)

	hog := task("oom", 0, 0, "sh", "-c", "tail /dev/zero") // tail keeps the one endless line in memory
	hog.Resources = wire.Resources{MemoryMB: 32}
	l.deploy(hog)
	st := l.waitState(hog.ExecutionID, wire.StateFailed)
	require.Contains(t, st.Message, "out of memory: exceeded its memory_mb of 32", st.Message)
	for _, c := range cg.childDirs(hog.ExecutionID) {
		_, err := os.Stat(c.Dir)
		require.ErrorIs(t, err, os.ErrNotExist, "the ended task's cgroup %s is left", c.Dir)
	}

	nst, ok := status(l.executions().Executions, neighbour.ExecutionID)
	require.True(t, ok)
	require.Equal(t, wire.StateRunning, nst.State, "the neighbour runs on")
	mem := cgroupDirOf(cg, neighbour.ExecutionID, "memory")
	require.Equal(t, []int{pid}, cgroupPIDs(t, mem), "the task, not its shim, is in its cgroup")
	limit := "memory.max"
	if cg.layout.Version == cgroupV1 {
		limit = "memory.limit_in_bytes"
	}
	got, err := readBounded(filepath.Join(mem, limit), maxCgroupFile)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(32<<20), strings.TrimSpace(got))
	if cg.layout.has("cpu") {
		file, want := "cpu.max", "25000 100000"
		if cg.layout.Version == cgroupV1 {
			file, want = "cpu.cfs_quota_us", "25000"
		}
		got, err := readBounded(filepath.Join(cgroupDirOf(cg, neighbour.ExecutionID, "cpu"), file), maxCgroupFile)
		require.NoError(t, err)
		require.Equal(t, want, strings.TrimSpace(got), "cpu_millis 250: a quarter of a core")
	}
	if dir := cgroupDirOf(cg, neighbour.ExecutionID, "pids"); cg.layout.has("pids") {
		got, err := readBounded(filepath.Join(dir, "pids.max"), maxCgroupFile)
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(DefaultTaskPidsMax), strings.TrimSpace(got))
	}

	l.cancel(neighbour.ExecutionID)
	require.Equal(t, "canceled by the leader", l.waitState(neighbour.ExecutionID, wire.StateCanceled).Message,
		"a task killed by a cancel is not out of memory")
	_, err = os.Stat(mem)
	require.ErrorIs(t, err, os.ErrNotExist, "the cancelled task's cgroup is left")
	for _, p := range parents {
		_, err := os.Stat(p.Dir)
		require.ErrorIs(t, err, os.ErrNotExist, "the executor's cgroup %s outlives its last task", p.Dir)
	}
}

// TestExecTaskInCgroupsWithoutLimits: a task that declares nothing runs
// in its cgroup with no memory limit, and ends as it would without one.
func TestExecTaskInCgroupsWithoutLimits(t *testing.T) {
	t.Parallel()
	e, l := startExecExecutor(t, Config{})
	cg := memoryCgroups(t, e)
	tk := task("free", 0, 0, "sh", "-c", "echo $$; cat /proc/self/cgroup >&2; exit 3")
	l.deploy(tk)
	require.Equal(t, "exit status 3", l.waitState(tk.ExecutionID, wire.StateFailed).Message)
	child := cgroupChild(tk.ExecutionID)
	require.Contains(t, l.logs(tk.ExecutionID, "stderr"), "/"+cg.layout.Parents[0].Dir[strings.LastIndex(cg.layout.Parents[0].Dir, "/")+1:]+"/"+child,
		"the task saw itself in its cgroup")
}

// TestExecCgroupsDisabled: with DisableCgroups a task runs outside any
// cgroup of the executor, and its memory is not capped.
func TestExecCgroupsDisabled(t *testing.T) {
	t.Parallel()
	e, l := startExecExecutor(t, Config{DisableCgroups: true})
	cg := e.rt.(*execRuntime).cg
	require.False(t, cg.enforced())
	require.Equal(t, "turned off (--disable-cgroups)", cg.why)
	tk := task("off", 0, 0, "sh", "-c", "cat /proc/self/cgroup >&2")
	tk.Resources = wire.Resources{MemoryMB: 1}
	l.deploy(tk)
	l.waitState(tk.ExecutionID, wire.StateFinished)
	require.NotContains(t, l.logs(tk.ExecutionID, "stderr"), "jobmaster-")
}

// TestShimExecInFailures: the shim's --exec-in exits 126 when it cannot
// join the cgroup and 127 when the command is not found.
func TestShimExecInFailures(t *testing.T) {
	t.Parallel()
	code, _, stderr := runShimCmd(t, "--exec-in", filepath.Join(t.TempDir(), "no-cgroup"), "--", "true")
	require.Equal(t, 126, code, stderr)
	require.Contains(t, stderr, "joining the task's cgroup")

	dir := t.TempDir() // a directory with a cgroup.procs file joins "fine"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.procs"), nil, 0o600))
	code, _, stderr = runShimCmd(t, "--exec-in", dir, "--", "no-such-command-jobmaster")
	require.Equal(t, 127, code, stderr)
	require.Contains(t, stderr, "executable file not found")
	code, stdout, stderr := runShimCmd(t, "--exec-in", dir, "--", "sh", "-c", "echo in place")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "in place\n", stdout)
}

// TestExecLeftoverCgroupsAreRemoved: the empty task cgroups that a
// crashed run of the executor left are removed when it starts again on
// the same data directory, and a task cgroup left after its task ended
// (a process in it was slow to die) by the next collection, which leaves
// a running task's alone.
func TestExecLeftoverCgroupsAreRemoved(t *testing.T) {
	t.Parallel()
	cfg := Config{NodeID: "e1", DataDir: t.TempDir(), Logger: testLogger(t), TaskPidsMax: DefaultTaskPidsMax}
	crashed := setupCgroups(cfg) // what the crashed run made
	if !crashed.layout.has("memory") {
		t.Skipf("this host offers no writable cgroup memory controller: %s", crashed.why)
	}
	t.Cleanup(crashed.close)
	for _, c := range crashed.childDirs("old/v/0/0") {
		require.NoError(t, os.MkdirAll(c.Dir, 0o755))
	}

	e, l := startExecExecutor(t, Config{NodeID: cfg.NodeID, DataDir: cfg.DataDir})
	cg := memoryCgroups(t, e)
	require.Equal(t, crashed.layout, cg.layout, "the same executor finds the same cgroups")
	for _, c := range cg.childDirs("old/v/0/0") {
		_, err := os.Stat(c.Dir)
		require.ErrorIs(t, err, os.ErrNotExist, "a crashed run's %s is left", c.Dir)
	}

	tk := task("live", 0, 0, "sh", "-c", "echo $$; exec sleep 300")
	l.deploy(tk)
	l.firstLinePID(tk.ExecutionID)
	for _, c := range cg.childDirs("ended/v/0/0") {
		require.NoError(t, os.Mkdir(c.Dir, 0o755))
	}
	e.collect()
	for _, c := range cg.childDirs("ended/v/0/0") {
		_, err := os.Stat(c.Dir)
		require.ErrorIs(t, err, os.ErrNotExist, "an ended task's %s is left", c.Dir)
	}
	for _, c := range cg.childDirs(tk.ExecutionID) {
		_, err := os.Stat(c.Dir)
		require.NoError(t, err, "the running task's cgroup was removed")
	}
	nst, ok := status(l.executions().Executions, tk.ExecutionID)
	require.True(t, ok)
	require.Equal(t, wire.StateRunning, nst.State)
}

// TestExecEscapedProcessDiesWithItsCgroup: a process that leaves its
// task's process group (setsid) is still in the task's cgroup, and is
// killed when the task ends, before the cgroup is removed.
func TestExecEscapedProcessDiesWithItsCgroup(t *testing.T) {
	t.Parallel()
	e, l := startExecExecutor(t, Config{})
	cg := memoryCgroups(t, e)
	tk := task("escape", 0, 0, "sh", "-c", "setsid sleep 300 & echo $!; sleep 0.2")
	l.deploy(tk)
	pid := l.firstLinePID(tk.ExecutionID)
	t.Cleanup(func() {
		if t.Failed() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	waitFor(t, "the sleep to lead a process group of its own", func() bool {
		p, ok := readProc(pid)
		return ok && p.pgrp == pid
	})
	l.waitState(tk.ExecutionID, wire.StateFinished)
	p, ok := readProc(pid)
	require.True(t, !ok || p.state == "Z", "the escaped process %d is alive (state %s)", pid, p.state)
	for _, c := range cg.childDirs(tk.ExecutionID) {
		_, err := os.Stat(c.Dir)
		require.ErrorIs(t, err, os.ErrNotExist, "the task's cgroup %s is left", c.Dir)
	}
}
