package executor

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// TestFollowedLogsEndWithTheTask: with follow=1 the answer goes on with
// what the task writes, ends once the task has ended, and says it is
// complete.
func TestFollowedLogsEndWithTheTask(t *testing.T) {
	t.Parallel()
	e, l := startExecExecutor(t, Config{})
	tk := task("f", 0, 0, "sh", "-c", "echo one; sleep 1; echo two")
	l.deploy(tk)
	start := time.Now()
	resp, err := httpClient.Get("http://" + e.Addr() + wire.PathLogs + "?id=" + tk.ExecutionID + "&follow=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\n", string(body))
	require.Equal(t, wire.EndComplete, resp.Trailer.Get(wire.HeaderEnd))
	require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond, "it waited for the task")

	// An ended task's log is sent whole at once, and complete.
	resp, err = httpClient.Get("http://" + e.Addr() + wire.PathLogs + "?id=" + tk.ExecutionID + "&follow=1")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "one\ntwo\n", string(body))
	require.Equal(t, wire.EndComplete, resp.Trailer.Get(wire.HeaderEnd))

	code, _ := l.do(http.MethodGet, wire.PathLogs+"?id="+tk.ExecutionID+"&follow=yes", nil)
	require.Equal(t, http.StatusBadRequest, code)
}

// TestAMissingProgramSaysSo: what a user reads when the program is not
// there, run directly, by a relative path, or through a shell.
func TestAMissingProgramSaysSo(t *testing.T) {
	t.Parallel()
	_, l := startExecExecutor(t, Config{})
	direct := task("m", 0, 0, "no-such-prog")
	relative := task("m", 1, 0, "./no-such-prog")
	shell := task("m", 2, 0, "sh", "-c", "no-such-prog")
	resp := l.deploy(direct, relative, shell)
	require.Equal(t, "command not found: no-such-prog", resp.Executions[0].Message)
	require.Equal(t, "command not found: ./no-such-prog (a path relative to the task's working directory)", resp.Executions[1].Message)
	require.Equal(t, "exit status 127: command not found (its stderr names it)", l.waitState(shell.ExecutionID, wire.StateFailed).Message)
}

// TestAFollowThatStartsBeforeTheTask: a consumer waits for its blocking
// input before it starts, so it has no log file yet when the follow
// begins; the follow still sends what it writes once it runs.
func TestAFollowThatStartsBeforeTheTask(t *testing.T) {
	t.Parallel()
	e1, l1 := dataExecutor(t, "e1", Config{})
	e2, l2 := dataExecutor(t, "e2", Config{})
	c := dataTaskOf("w", "c", 0, 1, `cat "$JOBMASTER_INPUT_DIR/p/0"; echo done`)
	c.Inputs = []wire.Input{{Vertex: "p", Mode: wire.ModeBlocking, Sources: sourcesOn(e1, "w", "p", 1)}}
	require.Equal(t, wire.StateDeploying, l2.deploy(c).Executions[0].State, "it waits for its input")
	resp, err := httpClient.Get("http://" + e2.Addr() + wire.PathLogs + "?id=" + c.ExecutionID + "&follow=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	p := dataTaskOf("w", "p", 0, 1, `echo hello > "$JOBMASTER_OUTPUT_DIR/c/0"`)
	p.Outputs = []wire.Output{{Vertex: "c", Parallelism: 1, Mode: wire.ModeBlocking}}
	l1.deploy(p)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "hello\ndone\n", string(body))
	require.Equal(t, wire.EndComplete, resp.Trailer.Get(wire.HeaderEnd))
}
