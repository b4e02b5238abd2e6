package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/launch"
)

// TestLogRotation: a task's stdout rotates at --task-log-max-size keeping
// --task-log-max-files files, and `jobmaster job logs` reads across the
// rotations: at once, the newest lines, as many as the files keep; with
// -f, started before the task writes, every line, in order.
func TestLogRotation(t *testing.T) {
	c := NewCluster(t, Options{Masters: 1, Executors: 1, ExecutorFlags: func(o *launch.Executor) {
		o.TaskLogMaxSize, o.TaskLogMaxFiles = 1000, 3
	}})
	e := c.Executors[0]
	var addrs []string
	for _, m := range c.Masters {
		addrs = append(addrs, m.HTTPAddr)
	}
	cli := func(args ...string) *exec.Cmd {
		cmd := exec.Command(binary(t), args...)
		cmd.Env = append(os.Environ(), "JOBMASTER_ADDR="+strings.Join(addrs, ","))
		return cmd
	}
	// 150 lines of 25 bytes, slowly: 3750 bytes, four rotations.
	var want strings.Builder
	for i := 0; i < 150; i++ {
		fmt.Fprintf(&want, "line %03d of the output..\n", i)
	}
	gate := filepath.Join(t.TempDir(), "go")
	c.Submit("chatty", `{"vertices": [{"id": "v", "parallelism": 1, "command": ["sh", "-c",
		"while [ ! -e `+gate+` ]; do sleep 0.05; done; i=0; while [ $i -lt 150 ]; do printf 'line %03d of the output..\\n' $i; i=$((i+1)); [ $((i % 10)) -eq 0 ] && sleep 0.05; done"]}]}`)
	dir := e.executionDir("chatty/v/0/0")
	WaitFor(t, "the task to run", 30*time.Second, func() bool { return exists(filepath.Join(dir, "stdout.log")) })

	follow := cli("job", "logs", "chatty", "v", "0", "-f")
	var followed strings.Builder
	follow.Stdout = &followed
	require.NoError(t, follow.Start())
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	c.WaitJob("chatty", 60*time.Second, "FINISHED")
	require.NoError(t, follow.Wait())
	require.Equal(t, want.String(), followed.String(), "job logs -f lost or repeated lines across rotations")

	for n, name := range []string{"stdout.log", "stdout.log.1", "stdout.log.2"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, "file %d of the log", n)
		require.LessOrEqual(t, fi.Size(), int64(1000))
	}
	require.False(t, exists(filepath.Join(dir, "stdout.log.3")), "more files kept than --task-log-max-files")
	out, err := cli("job", "logs", "chatty", "v", "0").Output()
	require.NoError(t, err)
	require.Greater(t, len(out), 2000, "job logs read only the current file")
	require.True(t, strings.HasSuffix(want.String(), string(out)), "job logs is not the tail of the output:\n%s", out)
}
