package wire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestDeployRequestRoundTrip: whatever tasks a leader groups, an executor
// decoding the request gets the same tasks back.
func TestDeployRequestRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 30).Draw(rt, "tasks")
		var tasks []Task
		for i := 0; i < n; i++ {
			job := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "job")
			vertex := rapid.SampledFrom([]string{"v", "w"}).Draw(rt, "vertex")
			sub := rapid.IntRange(0, 9).Draw(rt, "subtask")
			att := rapid.IntRange(0, 3).Draw(rt, "attempt")
			tk := Task{ExecutionID: ExecutionID(job, vertex, sub, att), JobID: job, Vertex: vertex, Subtask: sub,
				Parallelism: 10, Attempt: att, Slot: rapid.IntRange(0, 99).Draw(rt, "slot"),
				Command: []string{rapid.SampledFrom([]string{"true", "false"}).Draw(rt, "command")}}
			if rapid.Bool().Draw(rt, "env") {
				tk.Env = map[string]string{"K": rapid.SampledFrom([]string{"1", "2"}).Draw(rt, "value")}
			}
			if rapid.Bool().Draw(rt, "resources") {
				tk.Resources = Resources{CPUMillis: rapid.Int64Range(0, 2).Draw(rt, "cpu"), MemoryMB: rapid.Int64Range(0, 2).Draw(rt, "memory")}
			}
			tasks = append(tasks, tk)
		}
		b, err := json.Marshal(NewDeployRequest(Leader{Version: Version}, tasks))
		require.NoError(rt, err)
		var req DeployRequest
		require.NoError(rt, json.Unmarshal(b, &req))
		got, err := req.Tasks()
		require.NoError(rt, err)
		if len(tasks) == 0 {
			require.Empty(rt, got)
			return
		}
		require.ElementsMatch(rt, tasks, got)
	})
}

func TestTasksOfOneVertexShareOneGroup(t *testing.T) {
	var tasks []Task
	for i := 0; i < 100; i++ {
		for _, v := range []string{"source", "map"} { // slot sharing interleaves vertices
			tasks = append(tasks, Task{ExecutionID: ExecutionID("j", v, i, 0), JobID: "j", Vertex: v, Subtask: i,
				Parallelism: 100, Slot: i, Command: []string{"sim"}, Env: map[string]string{"SIM_DURATION": "5s"}})
		}
	}
	req := NewDeployRequest(Leader{}, tasks)
	require.Len(t, req.Groups, 2)
	require.Len(t, req.Groups[0].Subtasks, 300)
	require.Len(t, req.Groups[1].Subtasks, 300)
}

func TestTasksRejectsBrokenTriples(t *testing.T) {
	req := DeployRequest{Groups: []TaskGroup{{JobID: "j", Vertex: "v", Parallelism: 2, Subtasks: []int{0, 0, 0, 1, 0}}}}
	_, err := req.Tasks()
	require.ErrorContains(t, err, "not three per task")
}
