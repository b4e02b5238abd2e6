package executor

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// shimCmd runs the shim (this test binary) in a new process group.
func shimCmd(t *testing.T, args ...string) (*exec.Cmd, *syncBuffer, *syncBuffer) {
	cmd := exec.Command(testBinary(t), append([]string{shimArg}, args...)...)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, &stdout, &stderr
}

func runShimCmd(t *testing.T, args ...string) (int, string, string) {
	cmd, stdout, stderr := shimCmd(t, args...)
	err := cmd.Run()
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

func TestShimExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"success", []string{"--", "sh", "-c", "echo hi"}, 0, ""},
		{"exit code passes through", []string{"--grace", "1s", "--", "sh", "-c", "exit 7"}, 7, ""},
		{"killed by a signal", []string{"--", "sh", "-c", "kill -9 $$"}, 128 + 9, ""},
		{"command not found", []string{"--", "no-such-command-jobmaster"}, 127, "executable file not found"},
		{"no command", []string{"--grace", "1s"}, 2, "usage"},
		{"bad grace", []string{"--grace", "soon", "--", "true"}, 2, "invalid value"},
		{"negative grace", []string{"--grace", "-1s", "--", "true"}, 2, "negative"},
	}
	for _, tc := range tests {
		code, stdout, stderr := runShimCmd(t, tc.args...)
		require.Equal(t, tc.code, code, "%s: %s", tc.name, stderr)
		require.Contains(t, stderr, tc.err, tc.name)
		if tc.name == "success" {
			require.Equal(t, "hi\n", stdout)
		}
	}
}

func TestShimForwardsSIGTERMToTheGroup(t *testing.T) {
	t.Parallel()
	cmd, stdout, _ := shimCmd(t, "--grace", "30s", "--", "sh", "-c", "sleep 300 & echo $!; wait")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	var child int
	waitFor(t, "the task to start", func() bool {
		child, _ = strconv.Atoi(strings.TrimSpace(stdout.String()))
		return child > 0
	})
	require.Equal(t, cmd.Process.Pid, pgidOf(t, child), "the task runs in the shim's group")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 128+int(syscall.SIGTERM), ee.ExitCode(), "the task died of the forwarded SIGTERM")
	waitFor(t, "the group to be gone", func() bool { return len(groupMembers(cmd.Process.Pid)) == 0 })
}

func TestShimKillsAfterGrace(t *testing.T) {
	t.Parallel()
	cmd, _, stderr := shimCmd(t, "--grace", "200ms", "--", "sh", "-c", `trap "" TERM; sleep 300; sleep 300`)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	waitFor(t, "the task to run", func() bool { return len(groupMembers(cmd.Process.Pid)) >= 3 })
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the shim killed its group, itself included: %v", ws)
	require.Contains(t, stderr.String(), "did not exit 200ms after SIGTERM")
	waitFor(t, "the group to be gone", func() bool { return len(groupMembers(cmd.Process.Pid)) == 0 })
}

func TestShimArgs(t *testing.T) {
	require.Equal(t, []string{"--grace", "1.5s", "--executor-pid", "42", "--lease-file", "/d/lease", "--", "sh", "-c", "x"}, shimArgs(1500*time.Millisecond, 42, "/d/lease", "", logLimits{}, nil, []string{"sh", "-c", "x"}))
	require.Equal(t, []string{"--grace", "1.5s", "--executor-pid", "42", "--lease-file", "/d/lease", "--stdout", "/d/x/stdout.log", "--stderr", "/d/x/stderr.log",
		"--log-max-size", "100", "--log-max-files", "3", "--", "sh"},
		shimArgs(1500*time.Millisecond, 42, "/d/lease", "/d/x", logLimits{maxSize: 100, maxFiles: 3}, nil, []string{"sh"}))
}

// TestShimStartsNothingOnceItsExecutorIsGone: a shim whose parent is not
// the executor that started it (the executor died while the shim was
// starting, and it was reparented) runs nothing, where it used to run the
// task with nobody left to stop it. Its own parent stands in for the
// executor that is still there.
func TestShimStartsNothingOnceItsExecutorIsGone(t *testing.T) {
	t.Parallel()
	other := exec.Command("sleep", "300") // alive, and not the shim's parent
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })

	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	code, _, stderr := runShimCmd(t, "--executor-pid", strconv.Itoa(other.Process.Pid), "--", "touch", ran)
	require.Equal(t, exitExecutorGone, code, stderr)
	require.Contains(t, stderr, "died before the task started")
	require.NoFileExists(t, ran, "the task ran with its executor gone")

	code, _, stderr = runShimCmd(t, "--executor-pid", strconv.Itoa(os.Getpid()), "--", "touch", ran)
	require.Equal(t, 0, code, stderr)
	require.FileExists(t, ran, "the task runs while its executor is its parent")

	code, _, stderr = runShimCmd(t, "--executor-pid", "-1", "--", "true")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--executor-pid must not be negative")
}

// TestShimStopsTaskWhenParentDies exercises the getppid poll alone: the
// shim's parent is a shell (no parent-death signal), which exits; the shim,
// reparented, stops the task and kills what is left of its group.
func TestShimStopsTaskWhenParentDies(t *testing.T) {
	t.Parallel()
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	require.NoError(t, err)
	defer out.Close()
	cmd := exec.Command("sh", "-c", `"$0" `+shimArg+` --grace 5s -- sh -c 'echo $$; sleep 300 & sleep 300' & read x || true`, testBinary(t))
	cmd.Stdout = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var pgid int
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if pgid > 0 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})
	var pid int
	waitFor(t, "the task to start", func() bool {
		b, _ := os.ReadFile(out.Name())
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	pgid = pgidOf(t, pid)
	require.NotEqual(t, cmd.Process.Pid, pgid, "the shim made its own group")
	waitFor(t, "shim, sh and two sleeps", func() bool { return len(groupMembers(pgid)) == 4 })

	require.NoError(t, stdin.Close()) // the shell exits
	require.NoError(t, cmd.Wait())
	waitFor(t, "the orphaned shim to stop its task", func() bool { return len(groupMembers(pgid)) == 0 })
}

// TestShimStopsTheTaskWhenTheLeaseRunsOut: the shim enforces the lease by
// itself, so a task dies on time even when its executor is stopped.
func TestShimStopsTheTaskWhenTheLeaseRunsOut(t *testing.T) {
	t.Parallel()
	lease := filepath.Join(t.TempDir(), "lease")
	// The lease runs out 3 s from now; with a 1 s grace the shim starts
	// stopping the task about 1.75 s from now.
	deadline := monotonic() + 3*time.Second
	require.NoError(t, os.WriteFile(lease, []byte(strconv.FormatInt(int64(deadline), 10)), 0o644))
	code, _, stderr := runShimCmd(t, "--grace", "1s", "--lease-file", lease, "--", "sh", "-c", "sleep 60")
	require.Equal(t, 128+int(syscall.SIGTERM), code, stderr)
	require.Contains(t, stderr, "lease runs out")
	require.Less(t, monotonic(), deadline, "the task was dead before the lease ran out")

	// A renewed lease keeps the task running to its end.
	require.NoError(t, os.WriteFile(lease, []byte(strconv.FormatInt(int64(monotonic()+time.Hour), 10)), 0o644))
	code, stdout, stderr := runShimCmd(t, "--lease-file", lease, "--", "sh", "-c", "sleep 0.3; echo done")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "done\n", stdout)
}

func TestShimMustStop(t *testing.T) {
	d := 100 * time.Second
	require.False(t, shimMustStop(d-2*time.Second, d, time.Second))
	require.False(t, shimMustStop(d-1500*time.Millisecond, d, time.Second), "the executor acts first")
	require.True(t, shimMustStop(d-1250*time.Millisecond, d, time.Second))
	require.True(t, shimMustStop(d, d, time.Second))
}

// A task whose log cannot be written (the disk is full: /dev/full answers
// every write with ENOSPC) goes on and ends as it would have: the shim
// keeps reading its output and loses it, rather than close the pipe and
// kill the task with SIGPIPE.
func TestAnUnwritableLogDoesNotKillTheTask(t *testing.T) {
	t.Parallel()
	errLog := filepath.Join(t.TempDir(), "stderr.log")
	code, _, stderr := runShimCmd(t, "--stdout", "/dev/full", "--stderr", errLog, "--", "sh", "-c", "head -c 1000000 /dev/zero")
	require.Equal(t, 0, code, stderr)
}

// flakyLog fails its first fails writes, then takes them.
type flakyLog struct {
	fails int
	bytes.Buffer
}

func (f *flakyLog) Write(p []byte) (int, error) {
	if f.fails > 0 {
		f.fails--
		return 0, syscall.ENOSPC
	}
	return f.Buffer.Write(p)
}

// What a log cannot take is lost, and the log says how much once it takes
// writes again.
func TestCopyLogSaysWhatWasLost(t *testing.T) {
	log := &flakyLog{fails: 2}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyLog(log, pr)
	}()
	for _, line := range []string{"one\n", "two\n", "three\n", "four\n"} {
		_, err := pw.Write([]byte(line))
		require.NoError(t, err, "the copy stopped reading")
	}
	require.NoError(t, pw.Close())
	<-done
	require.Equal(t, "\n[jobmaster: 8 bytes of this output were lost: no space left on device]\nthree\nfour\n", log.String())

	// Lost at the very end: said as the output closes.
	log = &flakyLog{fails: 1}
	pr, pw = io.Pipe()
	done = make(chan struct{})
	go func() {
		defer close(done)
		copyLog(log, pr)
	}()
	_, err := pw.Write([]byte("last line\n"))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	<-done
	require.Equal(t, "\n[jobmaster: 10 bytes of this output were lost: no space left on device]\n", log.String())
}
