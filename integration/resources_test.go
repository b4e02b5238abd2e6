package integration

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/client"
	"jobmaster/launch"
)

// TestRegionTooBigRefused: with the executors' capacity known, a job
// with a region that can never fit is refused at submit with a 400 naming
// the region (a slot bigger than any executor; slots more than all of
// them together), and placement counts resources: a task that needs CPU
// its executor no longer has goes to another, though the first has the
// most free slots. The executors show their capacity in /v1/cluster.
func TestRegionTooBigRefused(t *testing.T) {
	c := NewCluster(t, Options{Masters: 1, Executors: 2, ExecutorFlags: func(o *launch.Executor) {
		o.CPUMillis, o.MemoryMB = 2000, 1024
		if o.NodeID == "e2" {
			o.Slots = 1
		}
	}})
	WaitFor(t, "the executors' capacity to be known", 30*time.Second, func() bool {
		v := c.ClusterView()
		for _, e := range v.Executors {
			if e.MemoryMB != 1024 || e.CPUMillis != 2000 || e.FreeMemoryMB == nil {
				return false
			}
		}
		return len(v.Executors) == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refused := func(id, spec, want string) {
		t.Helper()
		_, err := c.Client.SubmitJob(ctx, id, []byte(spec))
		var apiErr *client.APIError
		require.True(t, errors.As(err, &apiErr), "submit %s: %v", id, err)
		require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		require.Contains(t, apiErr.Message, want)
		_, err = c.Client.Job(ctx, id)
		require.Error(t, err, "refused job %s exists", id)
	}
	refused("huge", `{"vertices": [
		{"id": "prep", "parallelism": 1, "command": ["true"]},
		{"id": "train", "parallelism": 2, "command": ["true"], "inputs": [{"from": "prep", "mode": "blocking"}],
		 "resources": {"memory_mb": 2048}}]}`,
		"region of vertices train can never fit: a slot of it needs cpu_millis=0 memory_mb=2048, more than any of the 2 executors known offers")
	refused("wide", `{"vertices": [{"id": "w", "parallelism": 3, "command": ["true"], "resources": {"cpu_millis": 1500}}]}`,
		"region of vertices w can never fit: it needs its 3 slots at once (cpu_millis=4500 memory_mb=0 in all), and the 2 executors known could hold at most 2 of them")

	gate := filepath.Join(t.TempDir(), "go")
	task := `"resources": {"cpu_millis": 1500}, "command": ["sh", "-c", "while [ ! -e ` + gate + ` ]; do sleep 0.05; done"]`
	c.Submit("hog", `{"vertices": [{"id": "v", "parallelism": 1, `+task+`}]}`)
	hog := c.WaitJob("hog", 60*time.Second, "RUNNING")
	require.Equal(t, "e1", hog.Vertices[0].Subtasks[0].Executor, "the spread rule puts the first task on e1, which has the most free slots")
	c.Submit("next", `{"vertices": [{"id": "v", "parallelism": 1, `+task+`}]}`)
	next := c.WaitJob("next", 60*time.Second, "RUNNING")
	require.Equal(t, "e2", next.Vertices[0].Subtasks[0].Executor, "placed where its CPU is not free")
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	c.WaitJob("hog", 60*time.Second, "FINISHED")
	c.WaitJob("next", 60*time.Second, "FINISHED")
}

// TestTaskOutOfMemory: a task that allocates past its memory_mb is killed
// in its cgroup and FAILED "out of memory": its subtask says so through
// the HTTP API, so do the failed job and `jobmaster job status`, while a
// neighbour task on the same executor, with the same limit, runs on and
// finishes. Skipped where the executor cannot make cgroups (it says so at
// start).
func TestTaskOutOfMemory(t *testing.T) {
	c := NewCluster(t, Options{Masters: 1, Executors: 1})
	e := c.Executors[0]
	var log string
	WaitFor(t, "the executor to say whether it enforces task resources", 30*time.Second, func() bool {
		b, err := os.ReadFile(e.LogPath)
		log = string(b)
		return err == nil && strings.Contains(log, "task resources are")
	})
	if i := strings.Index(log, "task resources are not enforced"); i >= 0 {
		line, _, _ := strings.Cut(log[i:], "\n")
		t.Skipf("the executor cannot enforce task memory on this host: %s", line)
	}

	gate := filepath.Join(t.TempDir(), "go")
	c.Submit("calm", `{"vertices": [{"id": "v", "parallelism": 1, "resources": {"memory_mb": 32},
		"command": ["sh", "-c", "while [ ! -e `+gate+` ]; do sleep 0.05; done"]}]}`)
	c.WaitJob("calm", 60*time.Second, "RUNNING")
	c.Submit("hog", `{"vertices": [{"id": "v", "parallelism": 1, "resources": {"memory_mb": 32},
		"command": ["sh", "-c", "tail /dev/zero"]}], "restart": {"strategy": "none"}}`)
	hog := c.WaitJob("hog", 60*time.Second, "FAILED")
	st := hog.Vertices[0].Subtasks[0]
	require.Equal(t, "FAILED", string(st.State))
	require.Equal(t, e.ID, st.Executor)
	require.Contains(t, st.Message, "out of memory: exceeded its memory_mb of 32")
	require.Contains(t, hog.Message, "out of memory")

	var addrs []string
	for _, m := range c.Masters {
		addrs = append(addrs, m.HTTPAddr)
	}
	cmd := exec.Command(binary(t), "job", "status", "hog")
	cmd.Env = append(os.Environ(), "JOBMASTER_ADDR="+strings.Join(addrs, ","))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "job status: %s", out)
	require.Contains(t, string(out), "out of memory: exceeded its memory_mb of 32")

	calm := c.Job("calm")
	require.Equal(t, "RUNNING", calm.Status, "the neighbour runs on")
	require.Equal(t, 0, calm.Vertices[0].Subtasks[0].Attempt)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	c.WaitJob("calm", 60*time.Second, "FINISHED")
}
