package executor

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/internal/freeport"
	"jobmaster/wire"
)

// A late deploy of a producer that finished and whose partition is kept
// is not run again by the executor that ran it, restarted since (which
// forgot the execution, but not its partition): running it again would
// replace, under the same id, the bytes its consumers read.
func TestARestartedExecutorDoesNotRunAKeptProducerAgain(t *testing.T) {
	cfg := Config{NodeID: "e1", DataDir: t.TempDir(), HTTPAddr: freeport.Must(t), Runtime: RuntimeExec, Logger: testLogger(t),
		ShimCommand: []string{testBinary(t), shimArg}, CancelGrace: time.Second}
	e1, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, e1.Start())
	l := newLeader(t, e1, 1)
	l.heartbeat()
	g := dataTaskOf("rr", "gen", 0, 1, `date +%s%N > "$JOBMASTER_OUTPUT_DIR/sum/0"`)
	g.Outputs = []wire.Output{{Vertex: "sum", Parallelism: 1, Mode: wire.ModeBlocking}}
	l.deploy(g)
	done := l.waitState(g.ExecutionID, wire.StateFinished)
	l.heartbeat(g.ExecutionID) // recorded and acknowledged: forgotten
	before := readPartition(t, e1, g.ExecutionID)
	e1.Crash()

	e2 := startExecutor(t, cfg)
	l2 := newLeader(t, e2, 1)
	require.Len(t, l2.heartbeat().Partitions, 1, "the partition outlived the restart")
	answer := l2.deploy(g) // the same deploy, late
	st, ok := status(answer.Executions, g.ExecutionID)
	require.True(t, ok)
	require.Equal(t, wire.StateFinished, st.State, "answered as the execution that ran here")
	require.Equal(t, done.Bytes, st.Bytes)
	require.Equal(t, before, readPartition(t, e2, g.ExecutionID), "the partition is the one it left")
	require.Len(t, l2.heartbeat().Partitions, 1)
}

// readPartition reads consumer sum/0's part of partition id at e.
func readPartition(t *testing.T, e *Executor, id string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+e.Addr()+wire.PathPartitionData+"?id="+id+"&consumer=sum&index=0", nil)
	require.NoError(t, err)
	req.Header.Set(wire.HeaderToken, "1")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return string(b)
}
