package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/wire"
)

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes; skipped with -short")
	}
}

// newHistoryCluster is a cluster whose tasks write to one history file.
func newHistoryCluster(t *testing.T, opts Options) (*Cluster, string) {
	hist := filepath.Join(t.TempDir(), "history.log")
	opts.Env = append(opts.Env, "HISTORY="+hist)
	return NewCluster(t, opts), hist
}

type vertex struct {
	ID          string            `json:"id"`
	Parallelism int               `json:"parallelism"`
	Command     []string          `json:"command"`
	Inputs      []map[string]any  `json:"inputs,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Group       string            `json:"slot_sharing_group,omitempty"`
}

func jobSpec(t *testing.T, name string, restart map[string]any, vertices ...vertex) string {
	spec := map[string]any{"name": name, "vertices": vertices}
	if restart != nil {
		spec["restart"] = restart
	}
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	return string(b)
}

func subtasks(j *api.Job) map[string]api.Subtask {
	out := map[string]api.Subtask{}
	for _, v := range j.Vertices {
		for _, s := range v.Subtasks {
			out[fmt.Sprintf("%s/%d", v.ID, s.Index)] = s
		}
	}
	return out
}

func requireNoRestarts(t *testing.T, j *api.Job, hist []Event) {
	t.Helper()
	require.Zero(t, j.Restarts, "job %s restarted: %s", j.ID, j.Message)
	for name, s := range subtasks(j) {
		require.Zero(t, s.Attempt, "subtask %s restarted", name)
	}
	for id, n := range Starts(hist) {
		require.Equal(t, 1, n, "execution %s started %d times", id, n)
	}
}

func TestPipelineJobRunsToFinishedWithSlotSharing(t *testing.T) {
	skipShort(t)
	c, histPath := newHistoryCluster(t, Options{})
	envTask := []string{"sh", "-c", `echo "env $JOBMASTER_EXECUTION_ID $JOBMASTER_JOB_ID $JOBMASTER_VERTEX $JOBMASTER_SUBTASK $JOBMASTER_PARALLELISM $JOBMASTER_ATTEMPT $JOBMASTER_EXECUTOR_ID $GREETING" >> "$HISTORY"; sleep 0.5`}
	spec := jobSpec(t, "pipeline", nil,
		vertex{ID: "src", Parallelism: 3, Command: envTask, Env: map[string]string{"GREETING": "hi"}},
		vertex{ID: "map", Parallelism: 3, Command: envTask, Inputs: []map[string]any{{"from": "src", "mode": "pipelined"}}, Env: map[string]string{"GREETING": "hi"}},
		vertex{ID: "sink", Parallelism: 1, Command: envTask, Inputs: []map[string]any{{"from": "map", "mode": "blocking"}}, Env: map[string]string{"GREETING": "hi"}},
	)
	// Submit to a follower only.
	leader := c.Leader()
	var follower *Node
	for _, m := range c.Masters {
		if m != leader {
			follower = m
		}
	}
	fc, err := client.New(follower.HTTPAddr)
	require.NoError(t, err)
	defer fc.Close()
	_, err = fc.SubmitJob(c.ctx(), "pipe", []byte(spec))
	require.NoError(t, err)
	j := c.WaitJob("pipe", 60*time.Second, "FINISHED", "FAILED", "CANCELED")
	require.Equal(t, "FINISHED", j.Status, j.Message)
	subs := subtasks(j)
	started := 0
	for name, st := range subs {
		require.GreaterOrEqual(t, st.EndTime, j.SubmitTime, "%s has an end time", name)
		if st.StartTime != 0 { // 0 only if it ended before RUNNING was recorded
			started++
			require.GreaterOrEqual(t, st.StartTime, j.SubmitTime, name)
			require.LessOrEqual(t, st.StartTime, st.EndTime, name)
		}
	}
	require.NotZero(t, started, "subtasks carry the time they were recorded RUNNING")
	for i := 0; i < 3; i++ {
		require.Equal(t, subs[fmt.Sprintf("src/%d", i)].Executor, subs[fmt.Sprintf("map/%d", i)].Executor,
			"subtask %d of the pipelined vertices shares a slot, so an executor", i)
	}
	data, err := os.ReadFile(histPath)
	require.NoError(t, err)
	runs := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		require.Len(t, f, 9, line)
		exec, job, vtx, sub, par, att, ex, greet := f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8]
		runs[exec]++
		require.Equal(t, fmt.Sprintf("%s/%s/%s/%s", job, vtx, sub, att), exec)
		require.Equal(t, "pipe", job)
		require.Equal(t, "0", att)
		require.Equal(t, map[string]string{"src": "3", "map": "3", "sink": "1"}[vtx], par)
		require.Equal(t, subs[vtx+"/"+sub].Executor, ex)
		require.Equal(t, "hi", greet)
	}
	require.Len(t, runs, 7, "every subtask ran")
	for id, n := range runs {
		require.Equal(t, 1, n, "%s ran once", id)
	}
	c.WaitSameState()
}

func TestKillingTheLeaderRestartsNoTask(t *testing.T) {
	skipShort(t)
	c, hist := newHistoryCluster(t, Options{})
	c.Submit("steady", jobSpec(t, "steady", nil, vertex{ID: "v", Parallelism: 6, Command: historyTask(4, "")}))
	c.WaitJob("steady", 30*time.Second, "RUNNING")
	WaitFor(t, "every subtask running", 30*time.Second, func() bool {
		for _, s := range subtasks(c.Job("steady")) {
			if s.State != "RUNNING" {
				return false
			}
		}
		return true
	})
	old := c.Leader()
	tokenBefore := c.ClusterView().FencingToken
	old.Kill()
	newLeader := c.Leader()
	require.NotEqual(t, old, newLeader)
	require.Greater(t, c.ClusterView().FencingToken, tokenBefore)
	// The survivors found the killed leader's port refusing connections
	// and one stood for election without waiting for Raft's timeout
	// (master/succession.go); the other deferred to it.
	require.GreaterOrEqual(t, c.successions(old, "stood")+c.successions(old, "deferred"), 1.0,
		"no survivor found the killed leader's process gone")
	j := c.WaitJob("steady", 60*time.Second, "FINISHED", "FAILED", "CANCELED")
	require.Equal(t, "FINISHED", j.Status, j.Message)
	h, err := readHistory(hist)
	require.NoError(t, err)
	requireNoRestarts(t, j, h)
	old.Start()
	c.WaitSameState()
}

func TestPausedLeaderCausesNoRestartOrDuplicate(t *testing.T) {
	skipShort(t)
	c, hist := newHistoryCluster(t, Options{})
	c.Submit("steady", jobSpec(t, "steady", nil, vertex{ID: "v", Parallelism: 6, Command: historyTask(4, "")}))
	c.WaitJob("steady", 30*time.Second, "RUNNING")
	old := c.Leader()
	old.Pause()
	WaitFor(t, "another master to take over", 30*time.Second, func() bool {
		for _, m := range c.Masters {
			if m == old {
				continue
			}
			var cl api.Cluster
			if c.getJSON(c.URL(m.HTTPAddr, "/v1/cluster?stale"), &cl) == nil && cl.Leader != nil && *cl.Leader != old.ID {
				return true
			}
		}
		return false
	})
	// A paused process's port still takes connections: silence alone is
	// no evidence, and Raft's own timeout elected the new leader.
	for _, d := range []string{"stood", "deferred", "no_quorum"} {
		require.Zero(t, c.successions(old, d), "a survivor took the paused leader for gone (%s)", d)
	}
	// Let the new leader heartbeat the executors, then wake the old one: it
	// still believes it leads until it hears otherwise.
	c.WaitExecutorsAlive()
	old.Resume()
	j := c.WaitJob("steady", 60*time.Second, "FINISHED", "FAILED", "CANCELED")
	require.Equal(t, "FINISHED", j.Status, j.Message)
	h, err := readHistory(hist)
	require.NoError(t, err)
	requireNoRestarts(t, j, h)
	c.WaitSameState()
}

func TestExecutorRestartedEmptyReRunsItsWorkAtOnce(t *testing.T) {
	skipShort(t)
	// A long executor timeout: a rerun within it can only come from the
	// restarted executor's empty report (its executions are missing).
	c, _ := newHistoryCluster(t, Options{Lease: 20 * time.Second, Timeout: 30 * time.Second})
	c.Submit("long", jobSpec(t, "long", map[string]any{"strategy": "fixed-delay", "attempts": 5, "delay": "0s"},
		vertex{ID: "v", Parallelism: 4, Command: historyTask(60, "")}))
	WaitFor(t, "all subtasks running", 30*time.Second, func() bool {
		for _, s := range subtasks(c.Job("long")) {
			if s.State != "RUNNING" {
				return false
			}
		}
		return true
	})
	// The executor of subtask 0 (the leader may have placed every subtask
	// on one executor, if the other had not answered yet).
	subs := subtasks(c.Job("long"))
	var e1 *Node
	for _, e := range c.Executors {
		if e.ID == subs["v/0"].Executor {
			e1 = e
		}
	}
	require.NotNil(t, e1, "subtask 0 runs on %q", subs["v/0"].Executor)
	var onE1 []string
	for name, s := range subs {
		if s.Executor == e1.ID {
			onE1 = append(onE1, name)
		}
	}
	e1.Restart(true)
	j := c.WaitJob("long", 60*time.Second, "RUNNING")
	WaitFor(t, "e1's subtasks to run again", 20*time.Second, func() bool {
		j = c.Job("long")
		subs := subtasks(j)
		for _, name := range onE1 {
			if subs[name].Attempt < 1 || subs[name].State != "RUNNING" {
				return false
			}
		}
		return true
	})
	require.Contains(t, j.Message, "missing on executor "+e1.ID, "failed as missing, not as lost after the timeout")
	require.NoError(t, c.Client.CancelJob(c.ctx(), "long"))
	c.WaitJob("long", 30*time.Second, "CANCELED")
}

func TestFrozenExecutorIsLostAndItsStaleAttemptsStopWhenItThaws(t *testing.T) {
	skipShort(t)
	c, _ := newHistoryCluster(t, Options{})
	c.Submit("long", jobSpec(t, "long", map[string]any{"strategy": "fixed-delay", "attempts": 5, "delay": "0s"},
		vertex{ID: "v", Parallelism: 2, Command: historyTask(120, "")}))
	WaitFor(t, "both subtasks running", 30*time.Second, func() bool {
		for _, s := range subtasks(c.Job("long")) {
			if s.State != "RUNNING" {
				return false
			}
		}
		return true
	})
	e1 := c.Executors[0]
	var stale []string
	for _, s := range subtasks(c.Job("long")) {
		if s.Executor == e1.ID {
			stale = append(stale, s.ExecutionID)
		}
	}
	require.NotEmpty(t, stale)
	frozen := e1.Freeze()
	WaitFor(t, "e1 lost and its work running elsewhere", 60*time.Second, func() bool {
		for _, s := range subtasks(c.Job("long")) {
			if s.Executor == e1.ID || s.State != "RUNNING" {
				return false
			}
		}
		return true
	})
	e1.Thaw(frozen)
	WaitFor(t, "the stale attempts' processes to stop", 15*time.Second, func() bool {
		for _, id := range stale {
			if len(processesWithEnv("JOBMASTER_EXECUTION_ID="+id)) > 0 {
				return false
			}
		}
		return true
	})
	require.NoError(t, c.Client.CancelJob(c.ctx(), "long"))
	c.WaitJob("long", 30*time.Second, "CANCELED")
}

func TestCancelLeavesNoProcessBehind(t *testing.T) {
	skipShort(t)
	c, _ := newHistoryCluster(t, Options{})
	// Each task also starts a grandchild that ignores SIGTERM.
	task := []string{"sh", "-c", `(trap '' TERM; sleep 300) & sleep 300`}
	c.Submit("bg", jobSpec(t, "bg", nil, vertex{ID: "v", Parallelism: 4, Command: task}))
	WaitFor(t, "task processes", 30*time.Second, func() bool {
		return len(processesWithEnv("JOBMASTER_JOB_ID=bg")) >= 8
	})
	require.NoError(t, c.Client.CancelJob(c.ctx(), "bg"))
	j := c.WaitJob("bg", 30*time.Second, "CANCELED")
	for _, s := range subtasks(j) {
		require.Equal(t, wire.StateCanceled, s.State)
	}
	WaitFor(t, "no process of the job left", 15*time.Second, func() bool {
		return len(processesWithEnv("JOBMASTER_JOB_ID=bg")) == 0
	})
}

func TestRestartStrategyAndRegionFailover(t *testing.T) {
	skipShort(t)
	c, hist := newHistoryCluster(t, Options{})
	// "flaky" fails on its first two attempts; "steady" is its own region
	// and must be left alone by region failover.
	flaky := historyTask(0.3, `[ "$JOBMASTER_ATTEMPT" -lt 2 ] && { rec fail; exit 1; }`)
	c.Submit("mixed", jobSpec(t, "mixed", map[string]any{"strategy": "fixed-delay", "attempts": 3, "delay": "200ms"},
		vertex{ID: "flaky", Parallelism: 1, Command: flaky},
		vertex{ID: "steady", Parallelism: 2, Command: historyTask(4, ""), Group: "steady"},
	))
	j := c.WaitJob("mixed", 60*time.Second, "FINISHED", "FAILED", "CANCELED")
	require.Equal(t, "FINISHED", j.Status, j.Message)
	require.Equal(t, 2, j.Restarts)
	subs := subtasks(j)
	require.Equal(t, 2, subs["flaky/0"].Attempt)
	require.Equal(t, 0, subs["steady/0"].Attempt)
	require.Equal(t, 0, subs["steady/1"].Attempt)
	h, err := readHistory(hist)
	require.NoError(t, err)
	require.Empty(t, Overlaps(h, 0))

	// With no restarts allowed, the first failure fails the job.
	c.Submit("doomed", jobSpec(t, "doomed", map[string]any{"strategy": "none"},
		vertex{ID: "v", Parallelism: 1, Command: []string{"sh", "-c", "exit 3"}}))
	j = c.WaitJob("doomed", 30*time.Second, "FINISHED", "FAILED", "CANCELED")
	require.Equal(t, "FAILED", j.Status)
	require.Contains(t, j.Message, "exit status 3")
}

// successions sums, over the masters other than except, how often they
// found their leader's process gone and decided d
// (jobmaster_successions_total).
func (c *Cluster) successions(except *Node, d string) float64 {
	var n float64
	for _, m := range c.Masters {
		if m != except {
			n += max(0, c.scrape(m.HTTPAddr, `jobmaster_successions_total{decision="`+d+`"}`))
		}
	}
	return n
}
