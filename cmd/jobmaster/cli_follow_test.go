package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"jobmaster/api"
	"jobmaster/wire"
)

func intp(n int) *int { return &n }

func TestApplyEventKeepsTheJobInStep(t *testing.T) {
	job := &api.Job{ID: "j", Status: "RUNNING", Vertices: []api.Vertex{{ID: "v", Parallelism: 2, Subtasks: []api.Subtask{
		{Index: 0, State: "RUNNING", Executor: "e1", ExecutionID: "j/v/0/0"},
		{Index: 1, State: "RUNNING", Executor: "e2", ExecutionID: "j/v/1/0"},
	}}}}
	fails := &failureLog{said: map[string]bool{}}
	failed := api.Event{Type: "execution-state", Job: "j", Execution: "j/v/1/0", Vertex: "v", Subtask: intp(1), Attempt: intp(0),
		Executor: "e2", State: "FAILED", Message: "command not found: no-such-prog", Time: 5}
	assert.Equal(t, "v/1 attempt 0 FAILED: command not found: no-such-prog", fails.fromEvent(failed))
	assert.Equal(t, "", fails.fromEvent(failed), "said once")
	applyEvent(job, failed)
	applyEvent(job, api.Event{Type: "job-status", State: "RESTARTING", Message: "j/v/1/0 FAILED: ...", Restarts: intp(0)})
	applyEvent(job, api.Event{Type: "execution-state", Execution: "j/v/1/1", Vertex: "v", Subtask: intp(1), Attempt: intp(1), State: "SCHEDULED"})
	// A late event of an older attempt changes nothing.
	applyEvent(job, api.Event{Type: "execution-state", Execution: "j/v/1/0", Vertex: "v", Subtask: intp(1), Attempt: intp(0), State: "CANCELED"})
	s := job.Vertices[0].Subtasks[1]
	assert.Equal(t, wire.State("SCHEDULED"), s.State)
	assert.Equal(t, 1, s.Attempt)
	assert.Equal(t, &api.PreviousAttempt{Attempt: 0, State: "FAILED", Message: "command not found: no-such-prog", EndTime: 5}, s.PreviousAttempt)
	assert.Equal(t, "RESTARTING", job.Status)

	// A poll that sees the same failure (now as the previous attempt)
	// does not say it again.
	assert.Empty(t, fails.fromJob(job))
	assert.Equal(t, "restarting: partition of gen/2 lost with executor e1",
		fails.fromEvent(api.Event{Type: "job-restart", Reason: "partition_lost", Message: "partition of gen/2 lost with executor e1"}))
}

// A failure the job held when following began is shown as "before", not
// stamped with the time since the command began (as if it had just
// happened); later ones are, also through a view that adds an offset.
func TestFailuresFromBeforeTheFollowSayBefore(t *testing.T) {
	var out bytes.Buffer
	v := sinceView{progressView: &lineView{w: &out}, offset: 2 * time.Second}
	v.failed("v/0 attempt 3 FAILED: exit status 1", earlier)
	v.failed("v/0 attempt 4 FAILED: exit status 1", 500*time.Millisecond)
	assert.Equal(t, "before v/0 attempt 3 FAILED: exit status 1\n2.5s v/0 attempt 4 FAILED: exit status 1\n", out.String())
}
