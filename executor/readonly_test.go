package executor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/internal/unprivileged"
	"jobmaster/wire"
)

// A producer that leaves a read-only tree in its output directory (what
// `cp -a` of a Go module cache leaves) finishes, and the executor starts
// again on its data directory.
func TestAProducerThatLeavesAReadOnlyTreeFinishes(t *testing.T) {
	if !unprivileged.Here(t) {
		return
	}
	cfg := Config{DataDir: t.TempDir(), NodeID: "e1", HTTPAddr: freePort(t), Runtime: RuntimeExec, CancelGrace: time.Second,
		ShimCommand: []string{testBinary(t), shimArg}, Logger: testLogger(t)}
	e, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, e.Start())
	l := newLeader(t, e, 1)
	l.heartbeat()
	g := dataTaskOf("j", "gen", 0, 1, `cd "$JOBMASTER_OUTPUT_DIR"
echo data > sum/0
mkdir -p junk/ro && echo x > junk/ro/f && chmod 500 junk/ro`)
	g.Outputs = []wire.Output{{Vertex: "sum", Parallelism: 1, Mode: wire.ModeBlocking}}
	l.deploy(g)
	st := l.waitState(g.ExecutionID, wire.StateFinished)
	require.EqualValues(t, 5, st.Bytes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, e.Shutdown(ctx))

	e2, err := New(cfg)
	require.NoError(t, err, "an executor restarted on its data directory starts")
	require.NoError(t, e2.Shutdown(ctx))
}
