package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/launch"
)

// executionDir is where executor n keeps the working directory and logs of
// an execution.
func (n *Node) executionDir(id string) string {
	return filepath.Join(n.DataDir, "executions", filepath.FromSlash(id))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestGCByAge: the working directory and logs of an execution stay while
// its task runs, and go once it has ended, been acknowledged, and the
// retention has passed.
func TestGCByAge(t *testing.T) {
	c := NewCluster(t, Options{Masters: 1, Executors: 1, ExecutorFlags: func(o *launch.Executor) {
		o.GCRetention, o.GCInterval = 2*time.Second, 100*time.Millisecond
	}})
	e := c.Executors[0]
	gate := filepath.Join(t.TempDir(), "go")
	c.Submit("aged", `{"vertices": [{"id": "v", "parallelism": 1,
		"command": ["sh", "-c", "echo hello; while [ ! -e `+gate+` ]; do sleep 0.05; done"]}]}`)
	dir := e.executionDir("aged/v/0/0")
	WaitFor(t, "the task to run", 30*time.Second, func() bool { return exists(filepath.Join(dir, "stdout.log")) })
	// A job that ends after the running task last wrote: once its
	// directory has gone for its age, the running task's is as old, and
	// stays because the task is held.
	c.Submit("short", `{"vertices": [{"id": "v", "parallelism": 1, "command": ["true"]}]}`)
	c.WaitJob("short", 30*time.Second, "FINISHED")
	WaitFor(t, "the short job's directory to be deleted", 30*time.Second, func() bool { return !exists(e.executionDir("short/v/0/0")) })
	require.True(t, exists(dir), "the directory of a running task was deleted")
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	c.WaitJob("aged", 30*time.Second, "FINISHED")
	// Its parents go with it: nothing of the job is left.
	WaitFor(t, "the ended execution's directory to be deleted", 30*time.Second, func() bool {
		return !exists(filepath.Join(e.DataDir, "executions", "aged"))
	})
	require.GreaterOrEqual(t, c.scrape(e.HTTPAddr, `jobmaster_executor_gc_deleted_total{reason="age"}`), 1.0)
}

// TestGCByDiskLimit: past the disk limit, the directories of the
// executions that ended first go before their retention, until the rest
// fit.
func TestGCByDiskLimit(t *testing.T) {
	c := NewCluster(t, Options{Masters: 1, Executors: 1, ExecutorFlags: func(o *launch.Executor) {
		o.GCRetention, o.GCInterval, o.GCDiskLimit = time.Hour, 100*time.Millisecond, 300<<10
	}})
	e := c.Executors[0]
	spec := `{"vertices": [{"id": "v", "parallelism": 1,
		"command": ["sh", "-c", "head -c 204800 /dev/zero > blob"]}]}`
	c.Submit("first", spec)
	c.WaitJob("first", 30*time.Second, "FINISHED")
	first := e.executionDir("first/v/0/0")
	require.True(t, exists(first), "200 KiB of 300 KiB went before the limit was passed")
	c.Submit("second", spec)
	c.WaitJob("second", 30*time.Second, "FINISHED")
	WaitFor(t, "the older directory to go for the disk limit", 30*time.Second, func() bool { return !exists(first) })
	require.True(t, exists(e.executionDir("second/v/0/0")), "the newer directory went too, though it fits the limit")
	require.GreaterOrEqual(t, c.scrape(e.HTTPAddr, `jobmaster_executor_gc_deleted_total{reason="disk"}`), 1.0)
}

// TestFullDiskGetsNoWork: an executor whose disk counts as full (here, a
// reserve larger than any disk) says so in /v1/cluster, and the leader
// places every task on the other one.
func TestFullDiskGetsNoWork(t *testing.T) {
	c := NewCluster(t, Options{Masters: 1, Executors: 2, ExecutorFlags: func(o *launch.Executor) {
		if o.NodeID == "e1" {
			o.DiskReserve = 1 << 50
		}
	}})
	WaitFor(t, "e1 reported with a full disk", 30*time.Second, func() bool {
		for _, e := range c.ClusterView().Executors {
			if e.ID == "e1" {
				return e.DiskFull
			}
		}
		return false
	})
	c.Submit("spread", `{"vertices": [{"id": "v", "parallelism": 4, "command": ["true"]}]}`)
	j := c.WaitJob("spread", 60*time.Second, "FINISHED")
	for _, s := range j.Vertices[0].Subtasks {
		require.Equal(t, "e2", s.Executor, "subtask %d placed on the executor with a full disk", s.Index)
	}
	for _, e := range c.ClusterView().Executors {
		require.Equal(t, e.ID == "e1", e.DiskFull, "executor %s", e.ID)
	}
}

// TestLeaseWriteFailureSurfaced: when the executor cannot write its lease
// file, /v1/cluster shows it as the executor's storage_error and the
// executor counts it, until a write succeeds again.
func TestLeaseWriteFailureSurfaced(t *testing.T) {
	c := NewCluster(t, Options{Masters: 1, Executors: 1})
	e := c.Executors[0]
	// A directory where the lease file's temporary copy goes: the write
	// fails (and the executor cannot remove it).
	blocker := filepath.Join(e.DataDir, "lease.tmp")
	// The executor renames its own lease.tmp into place now and then:
	// one may take the directory made here away before x is made in it.
	WaitFor(t, "a directory in the lease file's place", 10*time.Second, func() bool {
		return os.MkdirAll(filepath.Join(blocker, "x"), 0o700) == nil
	})
	storageError := func() string {
		for _, x := range c.ClusterView().Executors {
			if x.ID == e.ID {
				return x.StorageError
			}
		}
		return ""
	}
	WaitFor(t, "the lease write failure in /v1/cluster", 30*time.Second, func() bool {
		return strings.Contains(storageError(), "cannot write the lease file")
	})
	require.GreaterOrEqual(t, c.scrape(e.HTTPAddr, `jobmaster_executor_storage_write_failures_total{file="lease"}`), 1.0)
	require.NoError(t, os.RemoveAll(blocker))
	WaitFor(t, "the storage error to clear", 30*time.Second, func() bool { return storageError() == "" })
}
