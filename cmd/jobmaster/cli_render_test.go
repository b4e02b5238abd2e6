package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"jobmaster/api"
	"jobmaster/wire"
)

// vertex builds a vertex whose subtasks have the given states.
func vertex(id string, states ...string) api.Vertex {
	v := api.Vertex{ID: id, Parallelism: len(states)}
	for i, s := range states {
		v.Subtasks = append(v.Subtasks, api.Subtask{Index: i, State: wire.State(s)})
	}
	return v
}

func TestFormatElapsed(t *testing.T) {
	tests := map[time.Duration]string{
		-time.Second:                    "0.0s",
		0:                               "0.0s",
		1234 * time.Millisecond:         "1.2s",
		59999 * time.Millisecond:        "59.9s",
		time.Minute:                     "1m00s",
		4*time.Minute + 5*time.Second:   "4m05s",
		time.Hour + 2*time.Minute + 3e9: "1h02m03s",
		30 * time.Hour:                  "30h00m00s",
	}
	for d, want := range tests {
		assert.Equal(t, want, formatElapsed(d), "%v", d)
	}
}

func TestCountSubtasks(t *testing.T) {
	c := countSubtasks(vertex("v", "RUNNING", "FINISHED", "FAILED", "CANCELING", "CANCELED", "SCHEDULED", "DEPLOYING"))
	assert.Equal(t, subtaskCounts{total: 7, running: 1, finished: 1, failed: 1, canceling: 1, canceled: 1}, c)
	assert.Equal(t, "1/7 running 1 finished 1 failed 1 canceling 1 canceled", c.summary())

	noParallelism := api.Vertex{ID: "v", Subtasks: []api.Subtask{{State: "RUNNING"}}}
	assert.Equal(t, 1, countSubtasks(noParallelism).total)
}

func TestProgressLine(t *testing.T) {
	many := &api.Job{Status: "RUNNING"}
	for i := range 12 {
		many.Vertices = append(many.Vertices, vertex(fmt.Sprintf("v%d", i), "RUNNING", "FINISHED"))
	}
	tests := []struct {
		name string
		job  *api.Job
		want string
	}{
		{name: "no vertices", job: &api.Job{Status: "CREATED"}, want: "CREATED"},
		{name: "two vertices", job: &api.Job{Status: "RUNNING", Vertices: []api.Vertex{
			vertex("split", "RUNNING", "RUNNING", "RUNNING", "RUNNING"), vertex("count", "SCHEDULED", "SCHEDULED")}},
			want: "RUNNING split: 4/4 running 0 finished 0 failed | count: 0/2 running 0 finished 0 failed"},
		{name: "restarts", job: &api.Job{Status: "RESTARTING", Restarts: 2, Vertices: []api.Vertex{vertex("a", "FAILED")}},
			want: "RESTARTING (restarts 2) a: 0/1 running 0 finished 1 failed"},
		{name: "many vertices are summed up", job: many,
			want: "RUNNING v0: 1/2 running 1 finished 0 failed | v1: 1/2 running 1 finished 0 failed | " +
				"v2: 1/2 running 1 finished 0 failed | v3: 1/2 running 1 finished 0 failed | " +
				"v4: 1/2 running 1 finished 0 failed | v5: 1/2 running 1 finished 0 failed | " +
				"v6: 1/2 running 1 finished 0 failed | v7: 1/2 running 1 finished 0 failed | " +
				"v8: 1/2 running 1 finished 0 failed | v9: 1/2 running 1 finished 0 failed | " +
				"2 more vertices: 2/4 running 2 finished 0 failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, progressLine(tt.job))
		})
	}
}

func TestProgressBar(t *testing.T) {
	tests := []struct {
		c    subtaskCounts
		want string
	}{
		{subtaskCounts{}, "[....................]"},
		{subtaskCounts{total: 4}, "[....................]"},
		{subtaskCounts{total: 4, running: 4}, "[>>>>>>>>>>>>>>>>>>>>]"},
		{subtaskCounts{total: 4, finished: 1, running: 2, failed: 1}, "[=====>>>>>>>>>>!!!!!]"},
		{subtaskCounts{total: 1000, finished: 1}, "[=...................]"},
		{subtaskCounts{total: 3, finished: 1, running: 1, failed: 1}, "[======>>>>>>!!!!!!..]"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, progressBar(tt.c), "%+v", tt.c)
	}
}

func TestLiveLines(t *testing.T) {
	job := &api.Job{ID: "wc", Status: "RUNNING", Restarts: 1, Message: "split[1] failed: exit status 2",
		Vertices: []api.Vertex{vertex("split", "RUNNING", "FINISHED"), vertex("count-words", "SCHEDULED")}}

	assert.Equal(t, []string{
		"Job wc: RUNNING  restarts 1  elapsed 3.5s",
		"  split        [==========>>>>>>>>>>]  1/2 running 1 finished 0 failed",
		"  count-words  [....................]  0/1 running 0 finished 0 failed",
		"  split[1] failed: exit status 2",
	}, liveLines(job, 3500*time.Millisecond, termSize{}))

	narrow := liveLines(job, time.Second, termSize{width: 21, height: 40})
	assert.Equal(t, "Job wc: RUNNING  re…", narrow[0])
	for _, l := range narrow {
		assert.LessOrEqual(t, len([]rune(l)), 20)
	}

	low := liveLines(job, time.Second, termSize{width: 200, height: 4})
	assert.Equal(t, []string{
		"Job wc: RUNNING  restarts 1  elapsed 1.0s",
		"  (2 more)  [======>>>>>>........]  1/3 running 1 finished 0 failed",
		"  split[1] failed: exit status 2",
	}, low)

	assert.Equal(t, []string{"Job x: CREATED  restarts 0  elapsed 0.0s"}, liveLines(&api.Job{ID: "x", Status: "CREATED"}, 0, termSize{}))
}

func TestFormatJobList(t *testing.T) {
	assert.Equal(t, "No jobs\n", formatJobList(nil))
	assert.Equal(t,
		"ID           NAME       STATUS\n"+
			"wordcount-1  wordcount  RUNNING\n"+
			"x            -          FINISHED\n",
		formatJobList([]api.JobSummary{{ID: "wordcount-1", Name: "wordcount", Status: "RUNNING"}, {ID: "x", Status: "FINISHED"}}))
}

func TestFormatJobStatus(t *testing.T) {
	now := time.Date(2024, 5, 1, 10, 0, 30, 0, time.UTC)
	submit := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	tests := []struct {
		name string
		job  api.Job
		want string
	}{
		{
			name: "running",
			job: api.Job{ID: "wc", Name: "wordcount", Status: "RUNNING", SubmitTime: submit, Vertices: []api.Vertex{{
				ID: "split", Parallelism: 2, Subtasks: []api.Subtask{
					{Index: 0, State: "RUNNING", Executor: "e1", ExecutionID: "wc/split/0/0"},
					{Index: 1, State: "SCHEDULED", Attempt: 1},
				}}}},
			want: `ID        = wc
Name      = wordcount
Status    = RUNNING
Restarts  = 0
Submitted = 2024-05-01T10:00:00Z
Duration  = 30.0s

Vertex "split" (parallelism 2): 1/2 running 0 finished 0 failed
INDEX  STATE      ATTEMPT  EXECUTOR  EXECUTION ID
0      RUNNING    0        e1        wc/split/0/0
1      SCHEDULED  1        -         -
`,
		},
		{
			name: "failed with messages",
			job: api.Job{ID: "wc", Status: "FAILED", Restarts: 3, Message: "no more restarts", SubmitTime: submit, EndTime: submit + 2500,
				Vertices: []api.Vertex{{ID: "a", Parallelism: 1, Subtasks: []api.Subtask{
					{Index: 0, State: "FAILED", Attempt: 3, Executor: "e2", ExecutionID: "wc/a/0/3", Message: "exit status 1"},
				}}}},
			want: `ID        = wc
Name      = -
Status    = FAILED
Restarts  = 3
Submitted = 2024-05-01T10:00:00Z
Duration  = 2.5s
Message   = no more restarts

Vertex "a" (parallelism 1): 0/1 running 0 finished 1 failed
INDEX  STATE   ATTEMPT  EXECUTOR  EXECUTION ID  MESSAGE
0      FAILED  3        e2        wc/a/0/3      exit status 1
`,
		},
		{
			name: "no submit time",
			job:  api.Job{ID: "x", Name: "n", Status: "CREATED"},
			want: "ID       = x\nName     = n\nStatus   = CREATED\nRestarts = 0\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, formatJobStatus(&tt.job, now))
		})
	}
}

func TestFormatMembers(t *testing.T) {
	leader := "m2"
	full := &api.Cluster{
		Leader: &leader, FencingToken: 17, ClusterID: "c0ffee",
		Masters: []api.Master{
			{ID: "m1", HTTPAddr: "127.0.0.1:7401", Role: "follower", Status: "alive"},
			{ID: "m2", HTTPAddr: "127.0.0.1:7402", Role: "leader", Status: "alive"},
			{ID: "m3", Role: "follower", Status: "dead"},
		},
		Executors: []api.Executor{
			{ID: "exec-1", HTTPAddr: "127.0.0.1:7411", Slots: 4, FreeSlots: 1, Status: "alive"},
			{ID: "exec-2", HTTPAddr: "127.0.0.1:7412", Slots: 16, FreeSlots: 16, Status: "alive", DiskFull: true},
			{ID: "exec-3", HTTPAddr: "127.0.0.1:7413", Slots: 2, FreeSlots: 2, Status: "drained", Draining: true, DrainDeadline: 1_700_000_000_000},
		},
	}
	assert.Equal(t, `Leader        = m2
Fencing token = 17
Cluster       = c0ffee

Masters
ID  HTTP ADDR       ROLE      STATUS  LEADER
m1  127.0.0.1:7401  follower  alive   false
m2  127.0.0.1:7402  leader    alive   true
m3  -               follower  dead    false

Executors
ID      HTTP ADDR       SLOTS  FREE SLOTS  STATUS            DRAINING  DRAIN DEADLINE
exec-1  127.0.0.1:7411  4      1           alive             false     -
exec-2  127.0.0.1:7412  16     16          alive, disk full  false     -
exec-3  127.0.0.1:7413  2      2           drained           true      2023-11-14T22:13:20Z
`, formatMembers(full))

	assert.Equal(t, `Leader        = none (no leader elected)
Fencing token = 0
Cluster       = -

Masters
No masters

Executors
No executors
`, formatMembers(&api.Cluster{}))

	// What executors offer tasks that declare CPU or memory, when some do.
	free := func(n int64) *int64 { return &n }
	assert.Equal(t, `ID  HTTP ADDR       SLOTS  FREE SLOTS  STATUS  DRAINING  DRAIN DEADLINE  FREE CPU   FREE MEMORY
e1  127.0.0.1:7411  4      3           alive   false     -               400/1000m  1024/4096 MiB
e2  127.0.0.1:7412  4      4           alive   false     -               -          -
`, formatExecutors([]api.Executor{
		{ID: "e1", HTTPAddr: "127.0.0.1:7411", Slots: 4, FreeSlots: 3, Status: "alive", CPUMillis: 1000, MemoryMB: 4096, FreeCPUMillis: free(400), FreeMemoryMB: free(1024)},
		{ID: "e2", HTTPAddr: "127.0.0.1:7412", Slots: 4, FreeSlots: 4, Status: "alive"},
	}))
}

func TestTruncate(t *testing.T) {
	assert.Equal(t, "abc", truncate("abc", 3))
	assert.Equal(t, "ab…", truncate("abcd", 3))
	assert.Equal(t, "héll…", truncate("héllo wörld", 5))
	assert.Equal(t, "abc", truncate("abc", 0))
}

// What the cluster holds reaches the terminal escaped: a job's name or a
// task's message with ESC or BEL can neither clear the screen nor retitle
// the window, in a table, a progress line or an error.
func TestControlCharactersAreShownEscaped(t *testing.T) {
	job := api.Job{ID: "esc1", Name: "\x1b[2J\x1b]0;title\a", Status: "FAILED", Message: "exec: \x1b[31mnosuch: not found",
		Vertices: []api.Vertex{{ID: "v", Parallelism: 1, Subtasks: []api.Subtask{{Index: 0, State: "FAILED", Executor: "e1", Message: "\x1b[31mred"}}}}}
	out := formatJobStatus(&job, time.Unix(0, 0)) + formatJobList([]api.JobSummary{{ID: job.ID, Name: job.Name, Status: job.Status}}) +
		failureLine("v", 0, 0, "FAILED", job.Message)
	assert.NotContains(t, out, "\x1b")
	assert.NotContains(t, out, "\a")
	assert.Contains(t, out, `\x1b[2J\x1b]0;title\x07`)
	assert.Contains(t, out, `exec: \x1b[31mnosuch: not found`)

	var stderr strings.Builder
	report(&stderr, errors.New("job esc1 FAILED: \x1b[31mred\nsecond line"))
	assert.Equal(t, "Error: job esc1 FAILED: \\x1b[31mred\nsecond line\n", stderr.String())
}

// A run under a tenth of a second is said in milliseconds, not 0.0s.
func TestFormatTook(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0.0s", 96 * time.Millisecond: "96ms", 100 * time.Millisecond: "0.1s", 2500 * time.Millisecond: "2.5s", 65 * time.Second: "1m05s",
	} {
		assert.Equal(t, want, formatTook(d), "%v", d)
	}
}
