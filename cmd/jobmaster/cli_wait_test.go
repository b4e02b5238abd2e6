package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/jobspec"
	"jobmaster/wire"
)

func TestJobRunWait(t *testing.T) {
	tests := []struct {
		name     string
		script   []string
		code     int
		lastLine string // of stdout
		stderr   string
	}{
		{name: "finished", script: []string{"CREATED", "RUNNING", "RUNNING", "FINISHED"}, code: 0,
			lastLine: "Job job-1 finished after "},
		{name: "failed", script: []string{"RUNNING", "FAILED"}, code: 1,
			lastLine: " FAILED split: 0/2 running 0 finished 2 failed | count: 0/1 running 0 finished 1 failed",
			stderr:   "Error: job job-1 FAILED: split[0] failed: exit status 1\n"},
		{name: "canceled", script: []string{"RUNNING", "CANCELLING", "CANCELED"}, code: 1,
			lastLine: " CANCELED split: 0/2 running 0 finished 0 failed 2 canceled | count: 0/1 running 0 finished 0 failed 1 canceled",
			stderr:   "Error: job job-1 CANCELED\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeMaster(t, tt.script...)
			r := runCLI(f.addr(), "job", "run", "--wait", specFile(t, wcSpec))
			assert.Equal(t, tt.code, r.code, r.stderr)
			assert.Equal(t, tt.stderr, r.stderr)
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			assert.Equal(t, "job-1", lines[0], "the id comes first")
			assert.Contains(t, lines[len(lines)-1], tt.lastLine)
		})
	}
}

func TestJobRunWaitPrintsOneLinePerChange(t *testing.T) {
	f := newFakeMaster(t, "CREATED", "CREATED", "RUNNING", "RUNNING", "RUNNING", "FINISHED")
	r := runCLI(f.addr(), "job", "run", "--wait", specFile(t, wcSpec))
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 5, r.stdout)
	assert.Regexp(t, `^\d+\.\ds CREATED split: 0/2 running 0 finished 0 failed \| count: 0/1 running 0 finished 0 failed$`, lines[1])
	assert.Regexp(t, `^\d+\.\ds RUNNING split: 2/2 running 0 finished 0 failed \| count: 1/1 running 0 finished 0 failed$`, lines[2])
	assert.Regexp(t, `^\d+\.\ds FINISHED split: 0/2 running 2 finished 0 failed \| count: 0/1 running 1 finished 0 failed$`, lines[3])
}

func TestJobRunWaitJSON(t *testing.T) {
	f := newFakeMaster(t)
	r := runCLI(f.addr(), "job", "run", "--wait", "--json", "--id", "wc", specFile(t, wcSpec))
	require.Equal(t, 0, r.code, r.stderr)
	var job api.Job
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &job), "stdout must be one JSON document: %s", r.stdout)
	assert.Equal(t, "FINISHED", job.Status)
}

func TestJobRunWaitInterrupted(t *testing.T) {
	f := newFakeMaster(t, "RUNNING")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-f.polls // the job has been seen at least once
		cancel()
	}()
	r := cli{env: map[string]string{addressEnv: f.addr()}, ctx: ctx}.run("job", "run", "--wait", "--id", "wc", specFile(t, wcSpec))
	assert.Equal(t, exitInterrupted, r.code)
	assert.Equal(t, "Stopped waiting; job wc keeps running.\nTo cancel it: jobmaster job cancel wc\n", r.stderr)
	f.mu.Lock()
	assert.Equal(t, "RUNNING", f.jobs["wc"].job.Status, "stopping the wait must not cancel the job")
	f.mu.Unlock()
}

func TestJobRunWaitInterruptedHintKeepsAddress(t *testing.T) {
	f := newFakeMaster(t, "RUNNING")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-f.polls
		cancel()
	}()
	r := cli{ctx: ctx}.run("job", "run", "--wait", "--address", f.addr(), specFile(t, wcSpec))
	assert.Equal(t, exitInterrupted, r.code)
	assert.Contains(t, r.stderr, "To cancel it: jobmaster job cancel job-1 --address "+f.addr()+"\n")
}

func TestJobRunWaitJobVanishes(t *testing.T) {
	f := newFakeMaster(t, "RUNNING")
	go func() {
		<-f.polls
		f.mu.Lock()
		delete(f.jobs, "wc")
		f.mu.Unlock()
	}()
	r := runCLI(f.addr(), "job", "run", "--wait", "--id", "wc", specFile(t, wcSpec))
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "Error: waiting for job \"wc\": job \"wc\" not found\n", r.stderr)
}

func TestLiveViewRedrawsInPlace(t *testing.T) {
	var out strings.Builder
	v := newLiveView(&out, func() termSize { return termSize{width: 80, height: 24} })
	job := &api.Job{ID: "wc", Status: "RUNNING", Vertices: []api.Vertex{vertex("a", "RUNNING")}}
	v.show(job, 0)
	first := out.Len()
	v.show(job, time.Second)
	v.close()

	frame := "\r\x1b[2KJob wc: RUNNING  restarts 0  elapsed %s\n" +
		"\r\x1b[2K  a  [>>>>>>>>>>>>>>>>>>>>]  1/1 running 0 finished 0 failed\n\x1b[J"
	want := "\x1b[?25l" + fmt.Sprintf(frame, "0.0s") + "\x1b[2A" + fmt.Sprintf(frame, "1.0s") + "\x1b[?25h"
	assert.Equal(t, want, out.String())
	assert.NotContains(t, out.String()[:first], "\x1b[2A", "the first frame does not move up")
}

func TestLineViewPrintsChangesOnly(t *testing.T) {
	var out strings.Builder
	v := &lineView{w: &out}
	running := &api.Job{Status: "RUNNING", Vertices: []api.Vertex{vertex("a", "RUNNING")}}
	v.show(running, 0)
	v.show(running, time.Second)
	v.show(&api.Job{Status: "FINISHED", Vertices: []api.Vertex{vertex("a", "FINISHED")}}, 2*time.Second)
	assert.Equal(t, "0.0s RUNNING a: 1/1 running 0 finished 0 failed\n2.0s FINISHED a: 0/1 running 1 finished 0 failed\n", out.String())
}

func TestSlotNote(t *testing.T) {
	job := func(states ...string) *api.Job {
		v := api.Vertex{ID: "wide", Parallelism: 12}
		for i, s := range states {
			v.Subtasks = append(v.Subtasks, api.Subtask{Index: i, State: wire.State(s)})
		}
		return &api.Job{ID: "j", Status: "CREATED", Vertices: []api.Vertex{{ID: "small", Parallelism: 1}, v}}
	}
	exec := func(slots, free int, status string) api.Executor {
		return api.Executor{HTTPAddr: "127.0.0.1:7431", Slots: slots, FreeSlots: free, Status: status}
	}
	cluster := func(xs ...api.Executor) *api.Cluster { return &api.Cluster{Executors: xs} }

	assert.Empty(t, slotNote(job("SCHEDULED", "DEPLOYING"), cluster(exec(4, 0, "alive")), 12, false), "something is placed")
	assert.Equal(t, "Waiting: no executor is alive to run it (see 'jobmaster members').",
		slotNote(job("SCHEDULED"), cluster(exec(4, 4, "dead")), 12, false))
	assert.Equal(t, "Waiting: it needs 12 slots at once to start and the executors that take work have 8 in all; it starts when more executors join.",
		slotNote(job("SCHEDULED"), cluster(exec(4, 4, "alive"), exec(4, 4, "alive"), exec(4, 4, "dead")), 12, false))
	assert.Equal(t, "Waiting for slots: 3 of 16 are free; it needs 12 at once to start, and starts when other jobs free them.",
		slotNote(job("SCHEDULED"), cluster(exec(8, 1, "alive"), exec(8, 2, "alive")), 12, false))
	assert.Equal(t, "Waiting for slots: 3 of 16 are free; it starts when enough are free for its first region (and the CPU and memory its tasks declare).",
		slotNote(job("SCHEDULED"), cluster(exec(8, 1, "alive"), exec(8, 2, "alive")), 0, false), "the spec is not at hand")

	// Slots enough: the tasks' CPU or memory is what it waits for.
	withMem := func(x api.Executor, cpu, mem int64) api.Executor {
		x.FreeCPUMillis, x.FreeMemoryMB = &cpu, &mem
		return x
	}
	assert.Equal(t, "Waiting: 9 of 12 slots are free, enough for the 3 it needs, but not the CPU or memory its tasks declare (the freest executor has 2000 millicores, 224 MiB free); it starts when other jobs free them, or more executors join.",
		slotNote(job("SCHEDULED"), cluster(withMem(exec(4, 3, "alive"), 2000, 224), withMem(exec(4, 3, "alive"), 1000, 224), withMem(exec(4, 3, "alive"), 0, 100)), 3, true))
	// ... of tasks that declare none: nothing it can name.
	assert.Equal(t, "Waiting: 9 of 12 slots are free, enough for the 3 it needs; the leader has not placed it yet (if it stays so, see the leader's log).",
		slotNote(job("SCHEDULED"), cluster(exec(4, 3, "alive"), exec(4, 3, "alive"), exec(4, 3, "alive")), 3, false))
	// Draining and disk-full executors take no work: their slots do not count.
	draining, full := exec(8, 8, "alive"), exec(8, 8, "alive")
	draining.Draining, full.DiskFull = true, true
	draining.ID, full.ID = "e2", "e3"
	assert.Equal(t, "Waiting for slots: 1 of 4 are free; it needs 2 at once to start, and starts when other jobs free them, or an executor not counted takes work again. Not counted: e2 (draining), e3 (disk full).",
		slotNote(job("SCHEDULED"), cluster(exec(4, 1, "alive"), draining, full), 2, false))
	assert.Equal(t, "Waiting: no executor takes work (each alive one is draining or its disk is full; see 'jobmaster executors list').",
		slotNote(job("SCHEDULED"), cluster(draining, full), 2, false))
	// A drained executor (draining, holding nothing needed) is alive too.
	drained := exec(8, 8, api.ExecutorDrained)
	drained.Draining = true
	assert.Equal(t, "Waiting: no executor takes work (each alive one is draining or its disk is full; see 'jobmaster executors list').",
		slotNote(job("SCHEDULED"), cluster(drained, drained), 2, false))
	// One that stopped under its drain is listed without an address: not alive.
	gone := api.Executor{ID: "e9", Status: api.ExecutorDrained, Draining: true}
	assert.Equal(t, "Waiting: no executor is alive to run it (see 'jobmaster members').",
		slotNote(job("SCHEDULED"), cluster(gone), 2, false))

	// A job that runs, whose next region's inputs are ready and which
	// needs more slots at once than there are, or are free.
	later := &api.Job{ID: "j", Status: "RUNNING", WaitingSlots: 6, Vertices: []api.Vertex{
		{ID: "a", Parallelism: 1, Subtasks: []api.Subtask{{State: "FINISHED"}}},
		{ID: "b", Parallelism: 6, Subtasks: []api.Subtask{{State: "SCHEDULED"}}}}}
	assert.Equal(t, "Waiting: it needs 6 slots at once for its next region and the executors that take work have 4 in all; it goes on when more executors join.",
		waitNote(later, cluster(exec(4, 4, "alive")), waitOpts{}))
	assert.Equal(t, "Waiting for slots: 2 of 8 are free; it needs 6 at once for its next region, and goes on when its own running tasks or other jobs free them.",
		waitNote(later, cluster(exec(4, 1, "alive"), exec(4, 1, "alive")), waitOpts{}))
	assert.Empty(t, waitNote(later, cluster(exec(4, 4, "alive"), exec(4, 4, "alive")), waitOpts{}),
		"enough slots free: the region is placed at the next pass")
	later.WaitingSlots = 0
	assert.Empty(t, waitNote(later, cluster(exec(4, 4, "alive")), waitOpts{}), "no region waits")
}

// A job that stays CREATED gets one line saying why, once, in the plain
// view; nothing is said of a job that starts.
func TestJobRunWaitSaysWhyAJobWaits(t *testing.T) {
	script := make([]string, 0, 60)
	for range 50 {
		script = append(script, "CREATED")
	}
	f := newFakeMaster(t, append(script, "RUNNING", "FINISHED")...)
	r := runCLI(f.addr(), "job", "run", "--wait", "--id", "wc", specFile(t, wcSpec))
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 1, strings.Count(r.stdout, "Waiting: 2 of 4 slots are free, enough for the 1 it needs; the leader has not placed it yet"), r.stdout)

	f = newFakeMaster(t)
	r = runCLI(f.addr(), "job", "run", "--wait", "--id", "wc2", specFile(t, wcSpec))
	assert.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "Waiting")
}

// "finished after" is the job's duration (as job status's Duration), not
// the time spent following it: a job followed after it started, or after
// it ended, took longer than the wait.
func TestJobOutcomeGivesTheJobsDuration(t *testing.T) {
	var out strings.Builder
	job := &api.Job{ID: "wide-1", Status: "FINISHED", SubmitTime: 1_000, EndTime: 4_200}
	require.NoError(t, jobOutcome(&out, job, 0, true))
	assert.Equal(t, "Job wide-1 finished after "+formatElapsed(3200*time.Millisecond)+"\n", out.String())
}

// A waiting command knows from the spec how many slots the job needs and
// whether its tasks declare resources; without a spec, neither.
func TestWaitOptsFromTheSpec(t *testing.T) {
	env := &cliEnv{}
	spec, err := jobspec.Parse([]byte(`{"vertices":[{"id":"a","parallelism":3,"command":["x"]},{"id":"b","parallelism":2,"command":["x"],"resources":{"memory_mb":800}}]}`))
	require.NoError(t, err)
	w := env.waitOpts(spec)
	assert.Equal(t, 2, w.need, "its smaller region")
	assert.True(t, w.resources)
	plain, err := jobspec.Parse([]byte(wcSpec))
	require.NoError(t, err)
	assert.False(t, env.waitOpts(plain).resources)
	assert.Equal(t, waitOpts{}, env.waitOpts(nil))
}

// A job waits to be placed when it is CREATED, or when a running or
// restarting job has every subtask SCHEDULED again (its work moved off
// executors that no longer take it): a waiting command then says why.
func TestAwaitsPlacement(t *testing.T) {
	job := func(status string, states ...string) *api.Job {
		v := api.Vertex{ID: "v"}
		for i, s := range states {
			v.Subtasks = append(v.Subtasks, api.Subtask{Index: i, State: wire.State(s)})
		}
		return &api.Job{Status: status, Vertices: []api.Vertex{v}}
	}
	assert.True(t, awaitsPlacement(job("CREATED", "SCHEDULED")))
	assert.True(t, awaitsPlacement(job("RUNNING", "SCHEDULED", "SCHEDULED")), "moved off a drained executor")
	assert.True(t, awaitsPlacement(job("RESTARTING", "SCHEDULED")))
	assert.False(t, awaitsPlacement(job("RUNNING", "SCHEDULED", "RUNNING")), "something runs")
	assert.False(t, awaitsPlacement(job("CANCELLING", "SCHEDULED")))
	assert.False(t, awaitsPlacement(job("FAILED", "SCHEDULED")))
}

// A running job whose next region waits for its tasks on a draining
// executor is said to wait for that drain, not for slots.
func TestWaitNoteNamesTheDrain(t *testing.T) {
	now := time.Now()
	cl := &api.Cluster{Executors: []api.Executor{
		{ID: "e1", Status: "alive", HTTPAddr: "127.0.0.1:1", Slots: 4, FreeSlots: 2, Draining: true},
		{ID: "e2", Status: "alive", HTTPAddr: "127.0.0.1:2", Slots: 4, FreeSlots: 4},
	}}
	job := &api.Job{ID: "ss", Status: "RUNNING", WaitingForDrain: "e1", WaitingForDrainDeadline: now.Add(90 * time.Second).UnixMilli(),
		Vertices: []api.Vertex{{ID: "a", Subtasks: []api.Subtask{{State: "RUNNING"}}}, {ID: "c", Subtasks: []api.Subtask{{State: "SCHEDULED"}}}}}
	note := waitNote(job, cl, waitOpts{})
	assert.Contains(t, note, "Waiting: its next region shares slots with its tasks on e1, which is draining and takes no new work")
	assert.Contains(t, note, "at the drain's deadline at the latest (in 1m")
	assert.Contains(t, drainNote(job, now.Add(2*time.Minute)), "now that the drain's deadline has passed")
}

// A 404 that says more of the id (a job of it was forgotten) is passed
// on; a plain one, or one of another shape, is the plain message.
func TestNotFoundSaysWhatTheMasterSays(t *testing.T) {
	forgotten := &client.APIError{StatusCode: http.StatusNotFound, Message: `job "a" not found: a job of this id ended and was forgotten at 2026-12-07T12:00:00Z (ended jobs are kept for --job-retention)`}
	require.EqualError(t, notFound(forgotten, "a"), forgotten.Message)
	require.EqualError(t, notFound(&client.APIError{StatusCode: http.StatusNotFound, Message: "no route"}, "a"), `job "a" not found`)
	other := errors.New("boom")
	require.Equal(t, other, notFound(other, "a"))
}
