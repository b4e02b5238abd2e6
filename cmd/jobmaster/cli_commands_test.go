package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/buildinfo"
	"jobmaster/fsm"
	"jobmaster/transport"
	"jobmaster/wire"
)

const wcSpec = `{"name": "wordcount", "vertices": [{"id": "split", "parallelism": 2, "command": ["true"]}, {"id": "count", "parallelism": 1, "command": ["true"]}]}`

// specFile writes spec to a temporary file and returns its path.
func specFile(t *testing.T, spec string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.json")
	require.NoError(t, os.WriteFile(path, []byte(spec), 0o600))
	return path
}

func TestJobRunPrintsGeneratedID(t *testing.T) {
	f := newFakeMaster(t)
	r := runCLI(f.addr(), "job", "run", specFile(t, wcSpec))
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "job-1\n", r.stdout)
	assert.Empty(t, r.stderr)
}

func TestJobRunWithIDIsIdempotent(t *testing.T) {
	f := newFakeMaster(t)
	file := specFile(t, wcSpec)

	r := runCLI(f.addr(), "job", "run", "--id", "wc", file)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "wc\n", r.stdout)

	r = runCLI(f.addr(), "job", "run", "--id", "wc", file)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "wc\n", r.stdout)
	assert.Contains(t, r.stderr, "already exists with this spec")

	r = runCLI(f.addr(), "job", "run", "--id", "wc", specFile(t, `{"name": "other"}`))
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "Error: submit job \"wc\": job \"wc\" exists with a different spec (HTTP 409)\n", r.stderr)

	// A job of that id and spec that has ended is not run again: said so.
	f.addJob(t, "done", wcSpec, "FINISHED")
	r = runCLI(f.addr(), "job", "run", "--id", "done", specFile(t, wcSpec))
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "Job done already exists with this spec and has ended (FINISHED): it does not run again. Its id is free for a new job once the masters forget it, --job-retention after it ended.\n", r.stderr)
}

func TestJobRunFromStdin(t *testing.T) {
	f := newFakeMaster(t)
	r := cli{env: map[string]string{addressEnv: f.addr()}, stdin: wcSpec}.run("job", "run", "-")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "job-1\n", r.stdout)
}

func TestJobRunInputErrors(t *testing.T) {
	f := newFakeMaster(t)
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{name: "missing file", args: []string{"job", "run", "/nonexistent/job.json"}, code: 1,
			want: "Error: job spec /nonexistent/job.json: no such file\n"},
		{name: "a directory", args: []string{"job", "run", os.TempDir()}, code: 1,
			want: "Error: job spec " + os.TempDir() + " is a directory: give a file\n"},
		{name: "empty stdin", args: []string{"job", "run", "-"}, code: 1, want: "Error: job spec on stdin is empty\n"},
		{name: "server rejects", args: []string{"job", "run", "-"}, stdin: "{nope", code: 1, want: "Error: submit job: malformed job spec"},
		{name: "no file", args: []string{"job", "run"}, code: 2,
			want: "Error: \"jobmaster job run\" takes 1 argument (FILE), got 0\nRun 'jobmaster job run --help' for usage.\n"},
		{name: "bad id", args: []string{"job", "run", "--id", "a/b", "x.json"}, code: 2, want: "Error: --id: \"a/b\" has the character '/'"},
		{name: "unknown flag", args: []string{"job", "run", "--nope", "x.json"}, code: 2, want: "Error: unknown flag: --nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cli{env: map[string]string{addressEnv: f.addr()}, stdin: tt.stdin}.run(tt.args...)
			assert.Equal(t, tt.code, r.code)
			assert.Contains(t, r.stderr, tt.want)
			assert.Empty(t, r.stdout)
		})
	}
}

func TestJobRunTooLarge(t *testing.T) {
	f := newFakeMaster(t)
	big := make([]byte, api.MaxBodyBytes+1)
	for i := range big {
		big[i] = ' '
	}
	r := runCLI(f.addr(), "job", "run", specFile(t, string(big)))
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "is larger than 1048576 bytes")
}

func TestJobRunJSON(t *testing.T) {
	f := newFakeMaster(t)
	r := runCLI(f.addr(), "job", "run", "--json", specFile(t, wcSpec))
	require.Equal(t, 0, r.code, r.stderr)
	var out api.SubmitResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	assert.Equal(t, "job-1", out.ID)
}

func TestJobStatus(t *testing.T) {
	f := newFakeMaster(t)
	f.addJob(t, "wc", wcSpec, "RUNNING")

	r := runCLI(f.addr(), "job", "status", "wc")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "ID        = wc\nName      = wordcount\nStatus    = RUNNING\nRestarts  = 0\n")
	assert.Contains(t, r.stdout, "Vertex \"split\" (parallelism 2): 2/2 running 0 finished 0 failed\n"+
		"INDEX  STATE    ATTEMPT  EXECUTOR  EXECUTION ID\n"+
		"0      RUNNING  0        e1        wc/split/0/0\n"+
		"1      RUNNING  0        e1        wc/split/1/0\n")

	r = runCLI(f.addr(), "job", "status", "wc", "--short")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Restarts  = 0\n")
	assert.Contains(t, r.stdout, "\nVertex \"split\" (parallelism 2): 2/2 running 0 finished 0 failed\nVertex \"count\"")
	assert.NotContains(t, r.stdout, "EXECUTION ID", "no subtasks")

	r = runCLI(f.addr(), "job", "status", "--json", "wc")
	require.Equal(t, 0, r.code, r.stderr)
	var job api.Job
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &job))
	assert.Equal(t, "wc", job.ID)
	assert.Len(t, job.Vertices, 2)

	r = runCLI(f.addr(), "job", "status", "nope")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "Error: job \"nope\" not found\n", r.stderr)
	assert.Empty(t, r.stdout)
}

func TestJobList(t *testing.T) {
	f := newFakeMaster(t)
	r := runCLI(f.addr(), "job", "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "No jobs\n", r.stdout)

	f.addJob(t, "wc", wcSpec)
	f.addJob(t, "longer-id", `{"name": "n"}`)
	r = runCLI(f.addr(), "job", "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "ID         NAME       STATUS\nwc         wordcount  CREATED\nlonger-id  n          CREATED\n", r.stdout)

	r = runCLI(f.addr(), "job", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list api.JobList
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	assert.Len(t, list.Jobs, 2)
}

func TestJobCancel(t *testing.T) {
	f := newFakeMaster(t)
	f.addJob(t, "wc", wcSpec, "RUNNING")

	r := runCLI(f.addr(), "job", "cancel", "wc")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "Cancel requested for job wc\n", r.stdout)

	r = runCLI(f.addr(), "job", "cancel", "--wait", "wc")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "CANCELED")
	assert.Contains(t, r.stdout, "Job wc canceled\n")

	r = runCLI(f.addr(), "job", "cancel", "nope")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "Error: cancel job \"nope\": job \"nope\" not found\n", r.stderr)
}

func TestCancelOfAnEndedJobSaysSo(t *testing.T) {
	f := newFakeMaster(t)
	f.addJob(t, "done", wcSpec, "FINISHED")
	require.Equal(t, 0, runCLI(f.addr(), "job", "status", "done").code)

	r := runCLI(f.addr(), "job", "cancel", "done")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "Job done had already ended FINISHED: nothing to cancel\n", r.stdout)
	r = runCLI(f.addr(), "job", "cancel", "--wait", "done")
	assert.Equal(t, 1, r.code, "--wait exits 0 only for a job that ended CANCELED")
	r = runCLI(f.addr(), "job", "cancel", "--json", "done")
	var res api.CancelResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, api.CancelResponse{ID: "done", Status: "FINISHED", Unchanged: true}, res)
}

func TestJobCancelWaitWhenJobFinishesFirst(t *testing.T) {
	f := newFakeMaster(t)
	f.addJob(t, "wc", wcSpec, "RUNNING")
	f.mu.Lock()
	f.jobs["wc"].onCancel = []string{"FINISHED"}
	f.mu.Unlock()

	r := runCLI(f.addr(), "job", "cancel", "--wait", "--json", "wc")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "Error: job wc ended FINISHED before the cancel took effect\n", r.stderr)
	var job api.Job
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &job), "--json prints the final job")
}

func TestJobLogs(t *testing.T) {
	f := newFakeMaster(t)
	f.addJob(t, "wc", wcSpec, "RUNNING")

	r := runCLI(f.addr(), "job", "logs", "wc", "split", "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "stdout of wc/split/1/0\n", r.stdout)

	r = runCLI(f.addr(), "job", "logs", "wc", "count", "0", "--stderr")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "stderr of wc/count/0/0\n", r.stdout)

	r = runCLI(f.addr(), "job", "logs", "wc", "split", "9")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "Error: vertex \"split\" of job \"wc\" has no subtask 9 (it has subtasks 0 to 1)\n", r.stderr)

	for _, bad := range []string{"x", "-1"} {
		r = runCLI(f.addr(), "job", "logs", "wc", "split", "--", bad)
		assert.Equal(t, 2, r.code)
		assert.Contains(t, r.stderr, "SUBTASK must be a subtask index")
	}

	// An earlier attempt's log, from the executor that has it.
	f.mu.Lock()
	st := &f.jobs["wc"].job.Vertices[0].Subtasks[1]
	require.Equal(t, "wc/split/1/0", st.ExecutionID)
	st.Attempt, st.ExecutionID = 2, "wc/split/1/2"
	f.mu.Unlock()
	r = runCLI(f.addr(), "job", "logs", "wc", "split", "1", "--attempt", "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "stdout of wc/split/1/1\n", r.stdout)
	r = runCLI(f.addr(), "job", "logs", "wc", "split", "1", "--attempt", "3")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `subtask split[1] of job "wc" is at attempt 2: no attempt 3`)
	r = runCLI(f.addr(), "job", "logs", "wc", "split", "1", "--attempt", "2")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "stdout of wc/split/1/2\n", r.stdout, "the current attempt by its number")
	r = runCLI(f.addr(), "job", "logs", "wc", "split", "1", "--attempt", "-1")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--attempt must be an attempt number")

	// An execution id, as 'job status' lists it, names an attempt.
	r = runCLI(f.addr(), "job", "logs", "wc/split/1/1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "stdout of wc/split/1/1\n", r.stdout)
	r = runCLI(f.addr(), "job", "logs", "wc/split/1/2", "--stderr")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "stderr of wc/split/1/2\n", r.stdout)
	r = runCLI(f.addr(), "job", "logs", "wc/split/1")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `"wc/split/1" is no execution id (JOB/VERTEX/SUBTASK/ATTEMPT)`)
	r = runCLI(f.addr(), "job", "logs", "wc/split/1/1", "--attempt", "0")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--attempt 0 and the execution id's attempt 1 differ")
	r = runCLI(f.addr(), "job", "logs", "wc", "split")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "takes 3 arguments (JOB VERTEX SUBTASK)")
}

// A log whose executor refuses the client is read through the masters,
// with the client's token; --via-masters asks no executor; when both
// fail, the error names the executor's failure, then the masters'.
func TestJobLogsThroughTheMasters(t *testing.T) {
	f := newFakeMaster(t)
	f.addJob(t, "wc", wcSpec, "RUNNING")
	withToken := cli{env: map[string]string{addressEnv: f.addr(), tokenEnv: "ci-secret"}}

	r := withToken.run("job", "logs", "wc", "split", "1", "--via-masters")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "relayed stdout of wc/split/1/0\n", r.stdout)
	r = withToken.run("job", "logs", "wc", "split", "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "stdout of wc/split/1/0\n", r.stdout, "the executor answers: it is read from")

	f.execRefuses.Store(true)
	r = withToken.run("job", "logs", "wc", "split", "1", "--stderr")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "relayed stderr of wc/split/1/0\n", r.stdout)
	assert.Empty(t, r.stderr)
	f.mu.Lock()
	setStatus(&f.jobs["wc"].job, "FINISHED")
	f.mu.Unlock()
	r = withToken.run("job", "logs", "wc", "split", "1", "-f")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "relayed stdout of wc/split/1/0\n", r.stdout)
	assert.Equal(t, "split/1 attempt 0 ended FINISHED\n", r.stderr)

	// An answer as long as the most the masters relay may lack the log's
	// start: said on stderr.
	f.relayedBytes.Store(api.LogTailMax)
	r = withToken.run("job", "logs", "wc", "split", "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Len(t, r.stdout, api.LogTailMax)
	assert.Equal(t, "Note: the masters relay at most the last 16 MiB of a log: this is the end of the log of wc/split/1/0, which may begin earlier (the whole log is on executor e1)\n", r.stderr)
	f.relayedBytes.Store(0)

	r = runCLI(f.addr(), "job", "logs", "wc", "split", "1")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, `Error: executor "e1", logs of wc/split/1/0: this executor answers only peers with a certificate from the cluster's CA; none was presented (HTTP 403); `+
		"nor could the masters relay it: permission denied: GET /v1/jobs/wc/logs needs a token (HTTP 401)\n", r.stderr)

	// The masters' 404 does not hide why the executor was not read from.
	f.relayGone.Store(true)
	exec := f.exec.Listener.Addr().String()
	f.exec.Close()
	r = withToken.run("job", "logs", "wc", "split", "1")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, `Error: cannot reach executor "e1" at `+exec+` (status alive) for the logs of wc/split/1/0: connection refused; `+
		"nor could the masters relay it: executor e1 no longer has the log of wc/split/1/0 (HTTP 404)\n", r.stderr)
}

func TestMembers(t *testing.T) {
	f := newFakeMaster(t)
	r := runCLI(f.addr(), "members")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Leader        = m2\nFencing token = 42\n")
	assert.Contains(t, r.stdout, "m2  127.0.0.1:7402  leader    -       true\n")
	assert.Contains(t, r.stdout, "Executors\nID  HTTP ADDR")

	r = runCLI(f.addr(), "members", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var c api.Cluster
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &c))
	assert.Len(t, c.Masters, 3)
}

func TestAddressSources(t *testing.T) {
	f := newFakeMaster(t)
	// --address wins over the environment.
	r := cli{env: map[string]string{addressEnv: "nonsense"}}.run("job", "list", "--address", "http://"+f.addr())
	assert.Equal(t, 0, r.code, r.stderr)

	r = cli{env: map[string]string{addressEnv: "nonsense"}}.run("job", "list")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "Error: $JOBMASTER_ADDR: invalid address \"nonsense\"")

	r = runCLI(f.addr(), "members", "--address", "a:b")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "Error: --address: invalid address \"a:b\"")

	r = runCLI(f.addr(), "job", "list", "--timeout", "0s")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--timeout must be positive")

	// An empty argument is named, not sent as a path with a part missing.
	r = runCLI(f.addr(), "job", "logs", "", "v", "0")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "Error: JOB must not be empty")
	r = runCLI(f.addr(), "acl", "token", "delete", "")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "Error: ACCESSOR must not be empty")
}

func TestFailoverToTheAddressThatAnswers(t *testing.T) {
	f := newFakeMaster(t)
	r := runCLI(deadAddr(t)+","+f.addr(), "job", "run", "--id", "wc", "--wait", specFile(t, wcSpec))
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "FINISHED")
}

func TestUnreachableCluster(t *testing.T) {
	a, b := deadAddr(t), deadAddr(t)
	r := runCLI(a+","+b, "job", "list", "--timeout", "100ms")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "Error: no master answered; tried "+a+" (connection refused), "+b+" (connection refused)\n")
	assert.Contains(t, r.stderr, "'jobmaster dev'")
	assert.Equal(t, 1, strings.Count(r.stderr, "Still trying: no master answered; tried "), "one note while retrying: %s", r.stderr)
	assert.Empty(t, r.stdout)
}

// Every address refusing the connection: no master runs there, and the
// command says so after a few seconds, not after --timeout.
func TestNoMasterListening(t *testing.T) {
	a := deadAddr(t)
	r := runCLI(a, "job", "list")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "Still trying: no master answered; tried "+a+" (connection refused); giving up after 3s if no master listens by then")
	assert.Contains(t, r.stderr, "Error: no master answered; tried "+a+" (connection refused)\n")
}

// An explicit --timeout is waited out, refusals or not (a script that
// starts the masters, or waits out a restart of all of them).
func TestAnExplicitTimeoutIsWaitedOut(t *testing.T) {
	a := deadAddr(t)
	r := runCLI(a, "job", "list", "--timeout", "4s")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "giving up after 4s (Ctrl-C to stop now)")
	assert.NotContains(t, r.stderr, "if no master listens by then")
}

// A master that takes the request and holds it past --timeout (waiting
// for a leader, as masters do for 5 s) is up: the hint says what may hold
// it, not that no cluster runs.
func TestHeldRequestHint(t *testing.T) {
	release := make(chan struct{})
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer held.Close()
	defer close(release)
	r := runCLI(held.Listener.Addr().String()+","+deadAddr(t), "job", "list", "--timeout", "200ms")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "(timed out)")
	assert.Contains(t, r.stderr, "it may be\nwaiting for a leader")
	assert.Contains(t, r.stderr, "add --stale")
	assert.NotContains(t, r.stderr, "Is a cluster running?")
}

// A master that answers 503 is up without a quorum: the hint says so
// instead of suggesting that no cluster runs; a POST it refused may have
// been committed, and the hint says that too.
func TestNoLeaderHints(t *testing.T) {
	noLeader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "no leader available (an election may be in progress); retry shortly"})
	}))
	defer noLeader.Close()
	addr := noLeader.Listener.Addr().String() + "," + deadAddr(t)

	r := runCLI(addr, "job", "list", "--timeout", "100ms")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "Error: the cluster has no leader: "+noLeader.Listener.Addr().String()+" knows none; ")
	assert.Contains(t, r.stderr, ": connection refused\nA majority of the masters must run")
	assert.Contains(t, r.stderr, "add --stale")
	assert.NotContains(t, r.stderr, "no master answered", "a master did answer")
	assert.NotContains(t, r.stderr, "retry shortly", "one message, that does not contradict its hint")
	assert.NotContains(t, r.stderr, "Is a cluster running?")

	r = runCLI(addr, "job", "run", specFile(t, wcSpec))
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "(HTTP 503)")
	assert.Contains(t, r.stderr, "The job may have been created: check with 'jobmaster job list'.")
}

func TestFailoverWhileWaiting(t *testing.T) {
	f := newFakeMaster(t, "RUNNING") // the job runs until the test finishes it
	second := httptest.NewServer(f.srv.Config.Handler)
	defer second.Close()
	go func() {
		<-f.polls
		f.srv.Close() // the master the client uses dies
		f.mu.Lock()
		f.jobs["wc"].script = []string{"FINISHED"}
		f.mu.Unlock()
	}()
	r := runCLI(f.addr()+","+second.Listener.Addr().String(), "job", "run", "--wait", "--id", "wc", specFile(t, wcSpec))
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Job wc finished after ")
	assert.Empty(t, r.stderr, "a failover while waiting is silent")
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{args: []string{}, want: "Usage:"},
		{args: []string{"jobs"}, want: "Error: unknown command \"jobs\" for \"jobmaster\" (did you mean \"job\"?)"},
		{args: []string{"job"}, want: "Available Commands:"},
		{args: []string{"job", "stats", "x"}, want: "Error: unknown command \"stats\" for \"jobmaster job\" (did you mean \"status\"?)"},
		{args: []string{"job", "status"}, want: "takes 1 argument (ID), got 0"},
		{args: []string{"job", "list", "extra"}, want: "takes no arguments, got 1 (extra)"},
		{args: []string{"dev", "bogus"}, want: "unknown command \"bogus\" for \"jobmaster dev\""},
		{args: []string{"server", "bogus"}, want: "unknown command \"bogus\" for \"jobmaster server\""},
		{args: []string{"executor", "bogus"}, want: "unknown command \"bogus\" for \"jobmaster executor\""},
		{args: []string{"members", "--json=maybe"}, want: "invalid argument \"maybe\""},
		{args: []string{"--bogus"}, want: "unknown flag: --bogus\n"},
		{args: []string{"executor", "list"}, want: "unknown command \"list\" for \"jobmaster executor\" (did you mean 'jobmaster executors list'?)"},
		{args: []string{"server", "--nodeid", "m1"}, want: "unknown flag: --nodeid (did you mean --node-id?)"},
		{args: []string{"job", "list", "--stail"}, want: "unknown flag: --stail (did you mean --stale?)"},
	}
	for _, tt := range tests {
		r := runCLI("127.0.0.1:1", tt.args...)
		assert.Equal(t, 2, r.code, "%v: %s", tt.args, r.stderr)
		assert.Contains(t, r.stderr, tt.want, "%v", tt.args)
		assert.Empty(t, r.stdout, "%v", tt.args)
	}
}

func TestHelpGoesToStdout(t *testing.T) {
	r := runCLI("127.0.0.1:1", "job", "run", "--help")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "jobmaster job run FILE [flags]")
	assert.Contains(t, r.stdout, "--address")
}

func TestRolesNameMissingFlags(t *testing.T) {
	r := runCLI("127.0.0.1:1", "server", "--node-id", "m1")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "Error: --data-dir is required")
	r = runCLI("127.0.0.1:1", "server", "--node-id", "m1", "--data-dir", t.TempDir(), "--raft-log-level", "loud")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--raft-log-level")
	r = runCLI("127.0.0.1:1", "server", "--node-id", "m1", "--data-dir", t.TempDir(), "--log-format", "xml")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `--log-format "xml": use text or json`)
	r = runCLI("127.0.0.1:1", "executor", "--node-id", "e1", "--data-dir", t.TempDir())
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--join is required")
}

func TestInterruptedCall(t *testing.T) {
	arrived := make(chan struct{}, 1)
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer hung.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-arrived
		cancel()
	}()
	r := cli{env: map[string]string{addressEnv: hung.Listener.Addr().String()}, ctx: ctx}.run("job", "list")
	assert.Equal(t, exitInterrupted, r.code)
	assert.Equal(t, "Error: interrupted\n", r.stderr)
}

func TestJobLogsOfAnUnknownJob(t *testing.T) {
	f := newFakeMaster(t)
	r := runCLI(f.addr(), "job", "logs", "nope", "split", "0")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "Error: job \"nope\" not found\n", r.stderr, "as 'job status' says it")
}

// TestJSONOnEveryCommand: the commands that write files or keys print JSON
// with --json too.
func TestJSONOnEveryCommand(t *testing.T) {
	dir := t.TempDir()
	r := runCLI("", "tls", "ca", "create", "--dir", dir, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var ca tlsWritten
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ca), r.stdout)
	assert.Equal(t, dir+"/ca.pem", ca.Cert)
	r = runCLI("", "tls", "cert", "create", "--role", "client", "--node-id", "me", "--ca", dir, "--dir", dir, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var cert tlsWritten
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &cert), r.stdout)
	assert.Equal(t, "jobmaster://client/me", cert.Identity)
	r = runCLI("", "operator", "gossip", "keygen", "--json")
	var key map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &key), r.stdout)
	assert.Len(t, key["key"], 44)

	snap := newServerAt(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.IndexHeader, "17")
		_, _ = w.Write([]byte("snapshot bytes"))
	})
	file := dir + "/backup.snap"
	r = runCLI(snap, "operator", "snapshot", "save", file, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var saved snapshotSaved
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &saved), r.stdout)
	assert.Equal(t, snapshotSaved{File: file, Bytes: 14, Index: 17}, saved)

	// A directory is no file to save to: said before the snapshot is
	// taken.
	r = runCLI(snap, "operator", "snapshot", "save", dir)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, dir+" is a directory: give a file to save the snapshot to")

	// A backup is not overwritten unless asked; with --force it is
	// replaced whole, private, and nothing else is left beside it.
	require.NoError(t, os.WriteFile(file, []byte("older backup"), 0o600))
	r = runCLI(snap, "operator", "snapshot", "save", file)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "backup.snap exists: give another file, or --force to replace it")
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "older backup", string(got))
	r = runCLI(snap, "operator", "snapshot", "save", file, "--force")
	require.Equal(t, 0, r.code, r.stderr)
	got, err = os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "snapshot bytes", string(got))
	st, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	left, err := filepath.Glob(dir + "/.backup.snap.*")
	require.NoError(t, err)
	assert.Empty(t, left)
	// Through a link, the file it names is replaced; the link stays.
	link := dir + "/latest.snap"
	require.NoError(t, os.Symlink(file, link))
	require.NoError(t, os.WriteFile(file, []byte("older backup"), 0o600))
	r = runCLI(snap, "operator", "snapshot", "save", link, "--force")
	require.Equal(t, 0, r.code, r.stderr)
	lst, err := os.Lstat(link)
	require.NoError(t, err)
	assert.NotZero(t, lst.Mode()&os.ModeSymlink, "the link was replaced by a file")
	got, err = os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "snapshot bytes", string(got))
}

// A backup to standard output ("-" or /dev/stdout) is the snapshot's bytes
// alone: what is said of it goes to standard error; a restore reads "-"
// from standard input; a save into a directory that is not there says so.
func TestSnapshotThroughStandardStreams(t *testing.T) {
	var restored []byte
	snap := newServerAt(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			restored, _ = io.ReadAll(r.Body)
			writeJSON(w, http.StatusOK, api.SnapshotRestored{Restored: true, Jobs: 3, Executions: 7})
			return
		}
		w.Header().Set(api.IndexHeader, "17")
		_, _ = w.Write([]byte("snapshot bytes"))
	})
	for to, said := range map[string]string{"-": "standard output", "/dev/stdout": "/dev/stdout"} {
		r := runCLI(snap, "operator", "snapshot", "save", to)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, "snapshot bytes", r.stdout, to)
		assert.Equal(t, "Saved 14 bytes to "+said+" (the state at index 17)\n", r.stderr, to)
	}
	r := cli{env: map[string]string{addressEnv: snap}}.run("operator", "snapshot", "restore", "-")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "- is empty: no snapshot to restore")
	r = cli{env: map[string]string{addressEnv: snap}, stdin: "saved earlier"}.run("operator", "snapshot", "restore", "-")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "saved earlier", string(restored))
	assert.Equal(t, "Restored the state from standard input: 3 jobs, 7 executions\n", r.stdout)

	// A backup an older save to standard output made ends with its line
	// (or its --json answer) right after the snapshot's binary bytes: the
	// restore sends the bytes before it, and says so.
	var real bytes.Buffer
	_, err := fsm.NewState().Capture().WriteTo(&real)
	require.NoError(t, err)
	snapBytes := real.Bytes()
	old := filepath.Join(t.TempDir(), "old.snap")
	for _, tail := range []string{
		fmt.Sprintf("Saved %d bytes to /dev/stdout (the state at index 17)\n", len(snapBytes)),
		fmt.Sprintf("Saved %d bytes to /tmp/Saved 3 bytes to x\n", len(snapBytes)),
		fmt.Sprintf("{\n  \"file\": \"/dev/stdout\",\n  \"bytes\": %d,\n  \"index\": 17\n}\n", len(snapBytes)),
	} {
		require.NoError(t, os.WriteFile(old, append(append([]byte(nil), snapBytes...), tail...), 0o600))
		r = runCLI(snap, "operator", "snapshot", "restore", old)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, snapBytes, restored, tail)
		assert.Contains(t, r.stderr, fmt.Sprintf("which an older 'snapshot save' to standard output wrote into the backup; restoring the %d bytes before it", len(snapBytes)))
	}
	// A line that does not count the bytes before it is not taken off.
	wrong := append(append([]byte(nil), snapBytes...), "Saved 10 bytes to /dev/stdout\n"...)
	require.NoError(t, os.WriteFile(old, wrong, 0o600))
	r = runCLI(snap, "operator", "snapshot", "restore", old)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, wrong, restored)

	missing := filepath.Join(t.TempDir(), "nodir", "b.snap")
	r = runCLI(snap, "operator", "snapshot", "save", missing)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "cannot save to "+missing+": directory "+filepath.Dir(missing)+" does not exist")
}

// newServerAt serves h and returns its host:port.
func newServerAt(t *testing.T, h http.HandlerFunc) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// TestAnExecutorFirstInTheAddressList: an executor's address before a
// master's is passed over; executors only are said to be no masters.
func TestAnExecutorFirstInTheAddressList(t *testing.T) {
	f := newFakeMaster(t)
	executor := newServerAt(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(transport.RoleHeader, transport.RoleExecutor)
		writeJSON(w, http.StatusNotFound, api.Error{Error: "no such endpoint: " + r.URL.Path + " (this is executor e1: the job API is on the masters)"})
	})
	r := runCLI(executor+","+f.addr(), "job", "list")
	assert.Equal(t, 0, r.code, r.stderr)
	r = runCLI(executor, "job", "list")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, executor+" (an executor, not a master)")
	assert.Contains(t, r.stderr, "Those are not masters' addresses")
}

// A job that waits to be placed is said to, from the slots its answer
// says it needs and the cluster's.
func TestJobStatusSaysWhyAJobWaits(t *testing.T) {
	f := newFakeMaster(t)
	f.addJob(t, "wide", `{"name": "wide", "vertices": [{"id": "v", "parallelism": 12}]}`)
	f.mu.Lock()
	f.jobs["wide"].job.StartSlots = 12
	f.mu.Unlock()
	r := runCLI(f.addr(), "job", "status", "wide")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "\nWaiting: it needs 12 slots at once to start and the executors that take work have 4 in all; it starts when more executors join.\n")

	f.addJob(t, "wc", wcSpec, "RUNNING")
	r = runCLI(f.addr(), "job", "status", "wc")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "Waiting", "a placed job waits for nothing")
}

// `jobmaster version` and `--version` say the build and the versions it
// speaks; --json gives the same as JSON.
func TestVersion(t *testing.T) {
	want := fmt.Sprintf("wire protocol %d, snapshot format %d, command types 1-%d", wire.Version, fsm.SnapshotFormat, fsm.LastCommandType)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := cli{}.run(args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.True(t, strings.HasPrefix(r.stdout, "jobmaster "), r.stdout)
		require.Contains(t, r.stdout, want, args)
	}
	r := cli{}.run("version", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var b buildinfo.Info
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &b))
	require.Equal(t, wire.Version, b.Wire)
	require.Equal(t, fsm.SnapshotFormat, b.Snapshot)
	require.NotEmpty(t, b.Revision)
}

// A restore whose backup does not hold the token it was made with says
// so, before the next command is a bare 401.
func TestSnapshotRestoreSaysWhenItsTokenIsGone(t *testing.T) {
	snap := newServerAt(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			writeJSON(w, http.StatusOK, api.SnapshotRestored{Restored: true, Jobs: 1, Executions: 2})
			return
		}
		writeJSON(w, http.StatusUnauthorized, api.Error{Error: "ACL token not found: it was deleted, or never created"})
	})
	file := filepath.Join(t.TempDir(), "b.snap")
	require.NoError(t, os.WriteFile(file, []byte("saved earlier"), 0o600))
	r := runCLI(snap, "operator", "snapshot", "restore", file)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "the ACL tokens are now the backup's, and the token this command used is not")
	// --reset-acl with a backup that holds tokens resets nothing: the
	// masters' answer, not the flag, says which.
	r = runCLI(snap, "operator", "snapshot", "restore", file, "--reset-acl")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "the ACL tokens are now the backup's")
	assert.NotContains(t, r.stderr, "acl bootstrap")
	// A backup from before the bootstrap, restored on purpose, holds none.
	reset := newServerAt(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, api.SnapshotRestored{Restored: true, ACLReset: true})
	})
	r = runCLI(reset, "operator", "snapshot", "restore", file, "--reset-acl")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "the backup holds no ACL token")
	assert.Contains(t, r.stderr, "Run 'jobmaster acl bootstrap' now.")
}
