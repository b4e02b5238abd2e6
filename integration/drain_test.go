package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// Draining an executor (docs/operations.md, "Draining an executor"): the
// jobs here have the restart strategy none, so a move that counted as a
// failure would fail them.

// firstAttemptHangs runs forever at attempt 0 and finishes at once from
// attempt 1 on: only a move gets it done.
const firstAttemptHangs = `if [ "$JOBMASTER_ATTEMPT" = 0 ]; then exec sleep 600; fi; echo done on $JOBMASTER_EXECUTOR_ID`

var noRestart = map[string]any{"strategy": "none"}

// executorView is one executor as the leader shows it.
func (c *Cluster) executorView(t *testing.T, id string) api.Executor {
	t.Helper()
	x, ok := c.findExecutor(id)
	if !ok {
		t.Fatalf("executor %s not in /v1/cluster", id)
	}
	return x
}

// findExecutor is the leader's view of an executor, if it lists it (one
// that left gossip holding nothing is not listed until it is back).
func (c *Cluster) findExecutor(id string) (api.Executor, bool) {
	for _, x := range c.ClusterView().Executors {
		if x.ID == id {
			return x, true
		}
	}
	return api.Executor{}, false
}

// waitDrained waits until the leader shows the executor drained.
func (c *Cluster) waitDrained(t *testing.T, id string) {
	t.Helper()
	WaitFor(t, id+" to be drained", 30*time.Second, func() bool {
		x := c.executorView(t, id)
		return x.Draining && x.Status == api.ExecutorDrained
	})
}

// runningOn waits until every subtask of the job runs and returns the
// executor of each, by vertex/index.
func (c *Cluster) runningOn(t *testing.T, job string) map[string]string {
	t.Helper()
	var on map[string]string
	WaitFor(t, job+" to run", 30*time.Second, func() bool {
		j := c.Job(job)
		on = map[string]string{}
		for k, s := range subtasks(j) {
			if s.State != wire.StateRunning {
				return false
			}
			on[k] = s.Executor
		}
		return len(on) > 0
	})
	return on
}

func TestDrainMovesRunningTasksWithoutCountingThem(t *testing.T) {
	c := NewCluster(t, Options{Executors: 2, Slots: 4})
	spec := jobSpec(t, "hang", noRestart, vertex{ID: "v", Parallelism: 3, Command: []string{"sh", "-c", firstAttemptHangs}})
	c.Submit("hang", spec)
	on := c.runningOn(t, "hang")
	drained := on["v/0"]

	res, err := c.Client.DrainExecutor(c.ctx(), drained, "1s")
	require.NoError(t, err)
	require.True(t, res.Draining)
	require.True(t, c.executorView(t, drained).Draining)

	j := c.WaitJob("hang", 60*time.Second, "FINISHED", "FAILED")
	require.Equal(t, "FINISHED", j.Status, "a move is no failure: %s", j.Message)
	require.Contains(t, j.Message, "moved off draining executor "+drained)
	for k, s := range subtasks(j) {
		require.NotEqual(t, drained, s.Executor, "%s ran again on the draining executor", k)
		require.Equal(t, 1, s.Attempt, k)
	}
	c.waitDrained(t, drained)

	// A drained executor gets no new work; what runs there before the
	// deadline may finish there.
	c.Submit("after", jobSpec(t, "after", noRestart, vertex{ID: "v", Parallelism: 2, Command: []string{"true"}}))
	for k, s := range subtasks(c.WaitJob("after", 30*time.Second, "FINISHED")) {
		require.NotEqual(t, drained, s.Executor, k)
	}

	// Eligible again, it takes work again.
	_, err = c.Client.UndrainExecutor(c.ctx(), drained)
	require.NoError(t, err)
	require.False(t, c.executorView(t, drained).Draining)
	other := "e1"
	if drained == "e1" {
		other = "e2"
	}
	_, err = c.Client.DrainExecutor(c.ctx(), other, "1h")
	require.NoError(t, err)
	c.Submit("back", jobSpec(t, "back", noRestart, vertex{ID: "v", Parallelism: 1, Command: []string{"sh", "-c", "sleep 1"}}))
	c.runningOn(t, "back")
	// The long deadline lets it finish where it runs.
	for k, s := range subtasks(c.WaitJob("back", 30*time.Second, "FINISHED")) {
		require.Equal(t, drained, s.Executor, k)
		require.Equal(t, 0, s.Attempt, k)
	}
	c.waitDrained(t, other)
	c.WaitSameState()
}

// TestDrainReproducesHeldPartitionsElsewhere: gen's output is needed by
// sum, which has not started (it waits for hold), when gen/0's executor is
// drained at once: what gen ran there runs again elsewhere, uncounted (the
// job allows no restart), and sum reads that.
func TestDrainReproducesHeldPartitionsElsewhere(t *testing.T) {
	c := NewCluster(t, Options{Executors: 2, Slots: 4})
	gate := filepath.Join(t.TempDir(), "go")
	c.Submit("held", waitingSum(t, "held", gate, noRestart))
	var j *api.Job
	WaitFor(t, "gen to finish", 30*time.Second, func() bool { j = c.Job("held"); return genFinished(j) })
	drained := subtasks(j)["gen/0"].Executor
	require.NotEmpty(t, c.partitionsOn(t, drained), "%s holds gen's output", drained)

	_, err := c.Client.DrainExecutor(c.ctx(), drained, "0s")
	require.NoError(t, err)
	WaitFor(t, "gen/0 to run again", 30*time.Second, func() bool {
		return subtasks(c.Job("held"))["gen/0"].Attempt > 0
	})
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	j = c.WaitJob("held", 60*time.Second, "FINISHED", "FAILED")
	require.Equal(t, "FINISHED", j.Status, j.Message)
	require.Equal(t, wantSum, c.sumOf(t, "held"))
	for k, s := range subtasks(j) {
		require.NotEqual(t, drained, s.Executor, "%s ran on the drained executor", k)
	}
	c.waitDrained(t, drained)
	WaitFor(t, drained+" to hold no partition", 20*time.Second, func() bool { return len(c.partitionsOn(t, drained)) == 0 })
}

// TestADrainDoesNotWaitForPartitionsAlreadyRead: an executor that runs
// nothing and holds only a partition its consumers have read (they run:
// they fetched it whole) is drained at once, long before its deadline; the
// partition is dropped, nothing runs again, and the sum is exact.
func TestADrainDoesNotWaitForPartitionsAlreadyRead(t *testing.T) {
	c := NewCluster(t, Options{Executors: 3, Slots: 1})
	gate, j := c.runHeldSum(t, "read")
	// gen ran one subtask on each executor (one slot each); sum runs on two.
	idle := map[string]bool{"e1": true, "e2": true, "e3": true}
	for _, s := range j.Vertices[1].Subtasks {
		delete(idle, s.Executor)
	}
	require.Len(t, idle, 1)
	var drained string
	for ex := range idle {
		drained = ex
	}
	require.NotEmpty(t, c.partitionsOn(t, drained), "%s holds gen's output", drained)

	_, err := c.Client.DrainExecutor(c.ctx(), drained, "1h")
	require.NoError(t, err)
	c.waitDrained(t, drained)
	WaitFor(t, drained+" to hold no partition", 20*time.Second, func() bool { return len(c.partitionsOn(t, drained)) == 0 })
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	j = c.WaitJob("read", 60*time.Second, "FINISHED", "FAILED")
	require.Equal(t, "FINISHED", j.Status, j.Message)
	require.Equal(t, wantSum, c.sumOf(t, "read"))
	require.Zero(t, j.Restarts, j.Message)
	for k, s := range subtasks(j) {
		require.Zero(t, s.Attempt, "%s ran again", k)
	}
}

func TestSIGTERMDrainsTheExecutorFirst(t *testing.T) {
	c := NewCluster(t, Options{Executors: 2, Slots: 4, DrainGrace: 2 * time.Second})
	c.Submit("term", jobSpec(t, "term", noRestart, vertex{ID: "v", Parallelism: 2, Command: []string{"sh", "-c", firstAttemptHangs}}))
	on := c.runningOn(t, "term")
	n := c.Node(on["v/0"])
	n.Stop()
	j := c.WaitJob("term", 60*time.Second, "FINISHED", "FAILED")
	require.Equal(t, "FINISHED", j.Status, "a drained stop is no failure: %s", j.Message)
	for k, s := range subtasks(j) {
		require.NotEqual(t, n.ID, s.Executor, k)
	}
	// It left gossip holding nothing: the leader forgets it. Started
	// again, it is listed again, and ends the drain it asked for.
	WaitFor(t, n.ID+" to be forgotten", 30*time.Second, func() bool {
		_, listed := c.findExecutor(n.ID)
		return !listed
	})
	n.Start()
	WaitFor(t, n.ID+" to be eligible again", 30*time.Second, func() bool {
		x, ok := c.findExecutor(n.ID)
		return ok && !x.Draining && x.Status == "alive"
	})
}

// partitionsOn lists the partitions an executor reports holding.
func (c *Cluster) partitionsOn(t *testing.T, id string) []wire.Partition {
	t.Helper()
	var ps wire.Partitions
	require.NoError(t, c.getJSON(c.URL(c.Node(id).HTTPAddr, wire.PathPartitions), &ps))
	return ps.Partitions
}

func TestDrainNeedsAManagementTokenAndTLSSelfDrain(t *testing.T) {
	c := NewCluster(t, Options{Executors: 2, ACL: true, TLS: true, DrainGrace: 2 * time.Second})
	submit := c.ClientWith(c.Token("submit", "ci"))
	defer submit.Close()
	_, err := submit.DrainExecutor(c.ctx(), "e1", "1s")
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusForbidden, apiErr.StatusCode)
	_, err = c.Client.DrainExecutor(c.ctx(), "e1", "1h")
	require.NoError(t, err)
	_, err = c.Client.UndrainExecutor(c.ctx(), "e1")
	require.NoError(t, err)
	require.False(t, c.executorView(t, "e1").Draining)

	// Under TLS and ACLs an executor asks for its own drain with its
	// certificate, and may not ask for another's.
	asE1 := transport.NewClient(transport.ClientOptions{Timeout: 5 * time.Second, TLS: c.CA.Load(pki.Executor, "e1")})
	req := wire.DrainRequest{Version: wire.Version, Executor: "e2", Instance: "x", DeadlineMs: 1000}
	err = transport.PostJSON(c.ctx(), asE1, c.URL(c.Leader().HTTPAddr, wire.PathExecutorDrain), req, nil)
	var se *transport.StatusError
	require.ErrorAs(t, err, &se, "e1's certificate drains e2")
	require.Equal(t, http.StatusForbidden, se.Code, se.Message)
	require.False(t, c.executorView(t, "e2").Draining)
	c.Submit("tls", jobSpec(t, "tls", noRestart, vertex{ID: "v", Parallelism: 2, Command: []string{"sh", "-c", firstAttemptHangs}}))
	on := c.runningOn(t, "tls")
	n := c.Node(on["v/0"])
	n.Stop()
	j := c.WaitJob("tls", 60*time.Second, "FINISHED", "FAILED")
	require.Equal(t, "FINISHED", j.Status, j.Message)
	for k, s := range subtasks(j) {
		require.NotEqual(t, n.ID, s.Executor, k)
	}
}

// A second SIGTERM while an executor drains ends the drain: the executor
// stops as it would without one (its tasks stopped, their states pushed,
// gossip left) rather than dying where it stands.
func TestASecondSIGTERMEndsTheDrainGracefully(t *testing.T) {
	c := NewCluster(t, Options{Executors: 2, Slots: 4, DrainGrace: time.Hour})
	c.Submit("twice", jobSpec(t, "twice", noRestart, vertex{ID: "v", Parallelism: 1, Command: []string{"sh", "-c", "exec sleep 600"}}))
	on := c.runningOn(t, "twice")
	n := c.Node(on["v/0"])
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	WaitFor(t, n.ID+" to drain", 30*time.Second, func() bool {
		x, ok := c.findExecutor(n.ID)
		return ok && x.Draining
	})
	n.Stop() // the second
	logs, err := os.ReadFile(n.LogPath)
	require.NoError(t, err)
	require.Contains(t, string(logs), "second signal: the drain stops")
	require.Contains(t, string(logs), "executor stopped", "it stopped in order")
	// Its task was stopped and its state pushed: the job ends at once,
	// the executor is not declared lost.
	j := c.WaitJob("twice", 60*time.Second, "FAILED", "FINISHED", "CANCELED")
	require.Equal(t, "FAILED", j.Status)
	require.NotContains(t, j.Message, "lost", "the executor said how its task ended")
}
