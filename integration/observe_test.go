package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/wire"
)

// eventKey is what a comparison of two streams looks at: the place and
// the change.
func eventKey(e api.Event) string {
	return fmt.Sprintf("%d.%d %s %s %s %s %s", e.Index, *e.Offset, e.Type, e.Job, e.Execution, e.State, e.Node)
}

// streamEvents reads GET /v1/events?query on the master at addr, and hands
// every event (not heartbeats) to each until it returns false or the
// stream ends. It returns the cursor of the last line read (offset -1: a
// heartbeat's, which covers its whole entry) and whether the stream broke
// rather than being stopped.
func (c *Cluster) streamEvents(addr, query string, each func(api.Event) bool) (index uint64, offset int, broke bool) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(addr, "/v1/events?"+query), nil)
	require.NoError(c.t, err)
	resp, err := streamClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	offset = -1
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return index, offset, true
		}
		var e api.Event
		require.NoError(c.t, json.Unmarshal(line, &e), "%s", line)
		index, offset = e.Index, -1
		if e.Offset != nil {
			offset = *e.Offset
		}
		if e.Type == api.EventHeartbeat {
			continue
		}
		if !each(e) {
			return index, offset, false
		}
	}
}

// streamClient has no timeout: streams last.
var streamClient = &http.Client{}

// TestEventStreamResumesExactlyAcrossALeaderKill reads the event stream
// from the leader while jobs are submitted, kills the leader, and resumes
// on another master from the last event it got: what it reads, before and
// after, is exactly what a master that was never left shows, event for
// event, nothing missing and nothing twice.
func TestEventStreamResumesExactlyAcrossALeaderKill(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{Runtime: "sim"})
	leader := c.Leader()
	var others []*Node
	for _, m := range c.Masters {
		if m != leader {
			others = append(others, m)
		}
	}
	job := func(id string) string {
		return jobSpec(t, id, nil, vertex{ID: "v", Parallelism: 3, Command: []string{"true"},
			Env: map[string]string{"SIM_DURATION": "300ms"}})
	}
	// Jobs go on being submitted through any master until told to stop.
	stop := make(chan struct{})
	submitted := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				submitted <- nil
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err := c.Client.SubmitJob(ctx, fmt.Sprintf("load-%d", i), []byte(job(fmt.Sprintf("load-%d", i))))
			cancel()
			if err != nil {
				submitted <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	// From the leader, until it dies.
	var before []api.Event
	killed := make(chan struct{})
	go func() {
		// Once a few jobs have run, while more come.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if j, err := c.Client.Job(context.Background(), "load-3"); err == nil && j.Status == "FINISHED" {
				break
			}
		}
		leader.Kill()
		close(killed)
	}()
	index, offset, broke := c.streamEvents(leader.HTTPAddr, "index=0", func(e api.Event) bool {
		before = append(before, e)
		return true
	})
	<-killed
	require.True(t, broke, "the stream ends with the leader")
	require.NotEmpty(t, before)
	c.Leader()

	// The last job, submitted once another master leads.
	close(stop)
	require.NoError(t, <-submitted)
	c.Submit("last", job("last"))
	isLast := func(e api.Event) bool { return e.Job == "last" && e.Type == "job-status" && e.State == "FINISHED" }

	// Resumed on another master, from the cursor of the last line read.
	resume := fmt.Sprintf("index=%d", index)
	if offset >= 0 {
		resume += fmt.Sprintf("&offset=%d", offset)
	}
	var after []api.Event
	c.streamEvents(others[0].HTTPAddr, resume, func(e api.Event) bool {
		after = append(after, e)
		return !isLast(e)
	})
	// The whole stream, from a master that was never left.
	var whole []api.Event
	c.streamEvents(others[1].HTTPAddr, "index=0", func(e api.Event) bool {
		whole = append(whole, e)
		return !isLast(e)
	})
	var got, want []string
	for _, e := range append(before, after...) {
		got = append(got, eventKey(e))
	}
	for _, e := range whole {
		want = append(want, eventKey(e))
	}
	require.Equal(t, strings.Join(want, "\n"), strings.Join(got, "\n"), "resumed at %s after %d events", resume, len(before))
	// The kill itself is in the stream: a new leader with a newer token.
	var leaders []string
	for _, e := range whole {
		if e.Type == "leader-established" {
			leaders = append(leaders, fmt.Sprintf("%s@%d", e.Node, e.FencingToken))
		}
	}
	require.GreaterOrEqual(t, len(leaders), 2, "leaders: %v", leaders)
	require.NotEqual(t, leader.ID, strings.Split(leaders[len(leaders)-1], "@")[0])
	leader.Start()
}

// scrape reads one sample of the /v1/metrics of the node at addr; -1 if
// absent.
func (c *Cluster) scrape(addr, series string) float64 {
	c.t.Helper()
	resp, err := c.HTTP.Get(c.URL(addr, "/v1/metrics"))
	require.NoError(c.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(c.t, err)
	return v
}

// TestMetricsCountWhatHappens drives a real cluster through what the
// counters count: a failing task and its restart, an execution the leader
// does not expect, a lost executor. It also checks that JSON logs carry
// the common keys, and that the CLI follows a job through the stream,
// saying a failure as it happens.
func TestMetricsCountWhatHappens(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{LogFormat: "json"})
	leader := c.Leader()
	at := func(series string) float64 { return c.scrape(leader.HTTPAddr, series) }
	require.Equal(t, 2.0, at(`jobmaster_executors{status="alive"}`))
	require.Equal(t, 1.0, at(`jobmaster_is_leader`))

	// A missing program, followed by the CLI: each failure is said as it
	// happens, and the wait reads the event stream.
	spec := jobSpec(t, "missing", map[string]any{"strategy": "fixed-delay", "attempts": 1, "delay": "2s"},
		vertex{ID: "v", Parallelism: 1, Command: []string{"no-such-prog"}})
	file := t.TempDir() + "/missing.json"
	require.NoError(t, os.WriteFile(file, []byte(spec), 0o644))
	var addrs []string
	for _, m := range c.Masters {
		addrs = append(addrs, m.HTTPAddr)
	}
	cmd := exec.Command(binary(t), "job", "run", file, "--id", "missing", "--wait")
	cmd.Env = append(os.Environ(), "JOBMASTER_ADDR="+strings.Join(addrs, ","))
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the job fails")
	require.Contains(t, string(out), "v/0 attempt 0 FAILED: command not found: no-such-prog\n")
	require.Contains(t, string(out), "v/0 attempt 1 FAILED: command not found: no-such-prog\n")
	require.Contains(t, string(out), "Error: job missing FAILED after 1 restart:")
	// A stream is counted when it ends, once its master has seen the
	// client go.
	WaitFor(t, "the CLI's event stream counted", 10*time.Second, func() bool {
		streams := 0.0
		for _, m := range c.Masters {
			streams += max(0, c.scrape(m.HTTPAddr, `jobmaster_http_requests_total{code="200",method="GET",route="/v1/events"}`))
		}
		return streams >= 1
	})
	require.Equal(t, 1.0, at(`jobmaster_restarts_total{reason="task_failed"}`))
	require.GreaterOrEqual(t, at(`jobmaster_placements_total`), 2.0)
	require.GreaterOrEqual(t, at(`jobmaster_deploy_requests_total`), 2.0)
	require.Equal(t, 1.0, at(`jobmaster_jobs{status="FAILED"}`))

	// An execution the leader does not expect, deployed behind its back
	// with its own token: the next report has it cancelled, and counted.
	var cl api.Cluster
	require.NoError(t, c.getJSON(c.URL(leader.HTTPAddr, "/v1/cluster"), &cl))
	e1 := c.Executors[0]
	ghost := wire.Task{ExecutionID: "ghost/v/0/0", JobID: "ghost", Vertex: "v", Subtask: 0, Parallelism: 1, Slot: 3, Command: []string{"sleep", "30"}}
	body, err := json.Marshal(wire.NewDeployRequest(wire.Leader{Version: wire.Version, Cluster: cl.ClusterID, Token: cl.FencingToken, Node: "test"}, []wire.Task{ghost}))
	require.NoError(t, err)
	resp, err := c.HTTP.Post(c.URL(e1.HTTPAddr, wire.PathDeploy), "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	WaitFor(t, "the unknown execution cancelled and counted", 20*time.Second, func() bool {
		return at(`jobmaster_reconcile_actions_total{action="unknown_cancelled"}`) >= 1
	})
	WaitFor(t, "the ghost to end on its executor", 20*time.Second, func() bool {
		return c.scrape(e1.HTTPAddr, `jobmaster_executor_tasks{state="RUNNING"}`) == 0
	})

	// A job running on both executors; one executor is killed: lost, its
	// heartbeats fail, the job restarts for it.
	c.Submit("steady", jobSpec(t, "steady", nil, vertex{ID: "v", Parallelism: 2, Command: []string{"sleep", "60"}}))
	WaitFor(t, "steady running on both executors", 30*time.Second, func() bool {
		return at(`jobmaster_executions{state="RUNNING"}`) == 2
	})
	c.Executors[1].Kill()
	WaitFor(t, "the executor declared lost", 30*time.Second, func() bool {
		return at(`jobmaster_executors_lost_total`) >= 1
	})
	require.GreaterOrEqual(t, at(`jobmaster_restarts_total{reason="executor_lost"}`), 1.0)
	require.Greater(t, at(`jobmaster_executor_heartbeat_failures_total{status="suspect"}`)+
		at(`jobmaster_executor_heartbeat_failures_total{status="alive"}`), 0.0)
	require.Equal(t, 1.0, at(`jobmaster_executors{status="lost"}`))

	// JSON logs, with the same keys for the same things.
	log, err := os.ReadFile(leader.LogPath)
	require.NoError(t, err)
	found, why := false, ""
	for _, line := range strings.Split(string(log), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case rec["msg"] == "leadership established":
			require.Equal(t, leader.ID, rec["node"], "%s", line)
			require.Equal(t, cl.FencingToken, uint64(rec["token"].(float64)), "%s", line)
			found = true
		case rec["msg"] == "executor status" && rec["executor"] == c.Executors[1].ID && rec["to"] == "suspect":
			why, _ = rec["last_heartbeat_error"].(string)
		}
	}
	require.True(t, found, "no JSON line of the leadership in %s", leader.LogPath)
	// The killed executor turned suspect, and the line says why its
	// heartbeats failed.
	require.Contains(t, why, "connection refused", "the suspect line's last_heartbeat_error in %s", leader.LogPath)

	// A held-up executor turns suspect before its heartbeat times out:
	// the line says one is on its way unanswered.
	before, err := os.ReadFile(leader.LogPath)
	require.NoError(t, err)
	e1.Pause()
	defer e1.Resume()
	WaitFor(t, "the paused executor's suspect line", 20*time.Second, func() bool {
		log, err := os.ReadFile(leader.LogPath)
		require.NoError(t, err)
		for _, line := range strings.Split(string(log[len(before):]), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "executor status" && rec["executor"] == e1.ID && rec["to"] == "suspect" {
				why, _ = rec["last_heartbeat_error"].(string)
				return true
			}
		}
		return false
	})
	require.NotEmpty(t, why, "a paused executor's suspect line says why")
}
