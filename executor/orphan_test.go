package executor

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// runChildExecutor runs an executor as this (test) process, for
// TestTasksDieWithKilledExecutor: it prints its HTTP address and serves
// until killed or until its standard input closes.
func runChildExecutor(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: child executor DATADIR")
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	e, err := New(Config{
		NodeID:      "child",
		DataDir:     args[0],
		HTTPAddr:    "127.0.0.1:0",
		ShimCommand: []string{exe, shimArg},
		CancelGrace: time.Second,
		Lease:       time.Minute,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err == nil {
		err = e.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(e.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// TestTasksDieWithKilledExecutor: after kill -9 of the executor process, no
// process of its tasks remains, not even a grandchild; where tasks run in
// cgroups, their shims remove the task's cgroups and the executor's.
func TestTasksDieWithKilledExecutor(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(testBinary(t), childExecArg, t.TempDir())
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	pgid := 0
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if pgid != 0 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("child executor's log:\n%s", stderr.String())
		}
	})
	addrc := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addrc <- strings.TrimSpace(line)
	}()
	var addr string
	select {
	case addr = <-addrc:
	case <-time.After(30 * time.Second):
		t.Fatal("the child executor did not start")
	}
	require.NotEmpty(t, addr, "child executor failed: %s", stderr.String())

	l := &leader{t: t, base: "http://" + addr, token: 1}
	tk := task("orphan", 0, 0, "sh", "-c", "echo $$; sleep 300 & sleep 300")
	require.Equal(t, wire.StateRunning, l.deploy(tk).Executions[0].State)
	pgid = pgidOf(t, l.firstLinePID(tk.ExecutionID))
	waitFor(t, "shim, sh and two sleeps", func() bool { return len(groupMembers(pgid)) == 4 })

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	waitFor(t, "every task process to die with the executor", func() bool { return len(groupMembers(pgid)) == 0 })

	_, rest, enforced := strings.Cut(stderr.String(), "task resources are enforced with ")
	if !enforced {
		return
	}
	_, rest, _ = strings.Cut(rest, "cgroups=")
	parents, _, _ := strings.Cut(rest, " ")
	require.NotEmpty(t, parents)
	for _, dir := range strings.Split(parents, ",") {
		waitFor(t, "the shim to remove "+dir, func() bool {
			_, err := os.Stat(dir)
			return os.IsNotExist(err)
		})
	}
}
