package executor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

func manySimTasks(job string, n int, d time.Duration) []wire.Task {
	tasks := make([]wire.Task, n)
	for i := range tasks {
		tasks[i] = wire.Task{
			ExecutionID: fmt.Sprintf("%s/v/%d/0", job, i), JobID: job, Vertex: "v",
			Subtask: i, Parallelism: n, Slot: i % 4, Command: []string{"true"},
			Env: map[string]string{SimDurationEnv: d.String()},
		}
	}
	return tasks
}

// TestSimTasksCostNoGoroutines: thousands of sim tasks run on one timer.
func TestSimTasksCostNoGoroutines(t *testing.T) {
	e := startExecutor(t, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	l := newLeader(t, e, 1)
	before := goruntime.NumGoroutine()
	const n = 3000
	resp := l.deploy(manySimTasks("many", n, time.Hour)...)
	require.Len(t, resp.Executions, n)
	rep := l.heartbeat()
	require.Len(t, rep.Executions, n)
	require.Equal(t, 4, rep.UsedSlots)
	require.Less(t, goruntime.NumGoroutine()-before, 50, "no goroutine per sim task")

	ids := make([]string, n)
	for i, st := range rep.Executions {
		ids[i] = st.ExecutionID
	}
	l.cancel(ids...)
	waitFor(t, "every task to be CANCELED", func() bool {
		for _, st := range l.heartbeat().Executions {
			if st.State != wire.StateCanceled {
				return false
			}
		}
		return true
	})
	require.Empty(t, l.heartbeat(ids...).Executions)
}

func TestSimTasksEndInDueOrder(t *testing.T) {
	t.Parallel()
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 1)
	short := simTask("order", 0, 10*time.Millisecond, 0)
	long := simTask("order", 1, time.Hour, 0)
	l.deploy(long, short)
	l.waitState(short.ExecutionID, wire.StateFinished)
	st, _ := status(l.heartbeat().Executions, long.ExecutionID)
	require.Equal(t, wire.StateRunning, st.State)
}

// BenchmarkSimExecutors starts many sim executors in one process, deploys
// and completes tasks on each.
func BenchmarkSimExecutors(b *testing.B) {
	const executors, tasks = 50, 100
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for b.Loop() {
		es := make([]*Executor, executors)
		for i := range es {
			e, err := New(Config{NodeID: fmt.Sprint("e", i), DataDir: b.TempDir(), HTTPAddr: "127.0.0.1:0", Runtime: RuntimeSim, Logger: logger})
			require.NoError(b, err)
			require.NoError(b, e.Start())
			es[i] = e
		}
		for _, e := range es {
			l := newLeader(b, e, 1)
			l.deploy(manySimTasks("bench", tasks, 0)...)
		}
		for _, e := range es {
			l := newLeader(b, e, 1)
			waitFor(b, "tasks to finish", func() bool {
				for _, st := range l.heartbeat().Executions {
					if st.State != wire.StateFinished {
						return false
					}
				}
				return true
			})
			require.NoError(b, e.Shutdown(context.Background()))
		}
	}
}

// TestSimDataCostsNoGoroutines: thousands of sim producers and consumers
// cost no goroutine each; the producers' empty partitions are reported and
// released like any others.
func TestSimDataCostsNoGoroutines(t *testing.T) {
	e := startExecutor(t, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	l := newLeader(t, e, 1)
	const n = 2000
	producers := manySimTasks("data", n, 0)
	consumers := manySimTasks("data", n, time.Hour)
	outs := []wire.Output{{Vertex: "w", Parallelism: n, Mode: wire.ModeBlocking}}
	ins := []wire.Input{{Vertex: "v", Mode: wire.ModeBlocking, Sources: []wire.Source{{Subtask: 0, Execution: "data/v/0/0", Executor: "e1", Addr: e.Addr()}}}}
	for i := range producers {
		producers[i].Outputs = outs
		c := &consumers[i]
		c.Vertex, c.ExecutionID, c.Inputs = "w", fmt.Sprintf("data/w/%d/0", i), ins
	}
	before := goruntime.NumGoroutine()
	l.deploy(append(producers, consumers...)...)
	var rep wire.Report
	waitFor(t, "every producer to leave its partition", func() bool {
		rep = l.heartbeat()
		return len(rep.Partitions) == n
	})
	require.Less(t, goruntime.NumGoroutine()-before, 50, "no goroutine per sim task")
	for _, p := range rep.Partitions {
		require.Zero(t, p.Bytes)
	}
	ids := make([]string, n)
	for i, p := range rep.Partitions {
		ids[i] = p.ID
	}
	code, b := l.post(wire.PathRelease, wire.ReleaseRequest{Leader: l.hdr(), IDs: ids})
	require.Equal(t, 204, code, "%s", b)
	require.Empty(t, l.heartbeat().Partitions)
}
