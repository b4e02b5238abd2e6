package executor

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/executor/partition"
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// group is a deploy group of n subtasks of job/vertex.
func group(job, vertex string, n int) wire.TaskGroup {
	g := wire.TaskGroup{JobID: job, Vertex: vertex, Parallelism: max(n, 1), Command: []string{"true"}}
	for i := range n {
		g.Subtasks = append(g.Subtasks, i, 0, i%wire.MaxSlots)
	}
	return g
}

func TestCheckDeploy(t *testing.T) {
	longest := strings.Repeat("j", jobspec.MaxIDLength)
	widest := group(longest, strings.Repeat("v", jobspec.MaxIDLength), partition.MaxParallelism)
	require.NoError(t, checkDeploy(&wire.DeployRequest{Groups: []wire.TaskGroup{widest, group("j", "v", 1)}}),
		"the widest group a leader sends, with the longest ids")

	notTriples := group("j", "v", 2)
	notTriples.Subtasks = notTriples.Subtasks[:5]
	tooWide := group("j", "v", partition.MaxParallelism+1)
	tooWide.Parallelism = partition.MaxParallelism
	parallelism := func(p int) wire.TaskGroup { g := group("j", "v", 1); g.Parallelism = p; return g }
	var many []wire.TaskGroup // more tasks than a leader reads answers for
	for range maxDeployTasks/partition.MaxParallelism + 1 {
		many = append(many, widest)
	}
	tests := []struct {
		name   string
		groups []wire.TaskGroup
		want   string
	}{
		{"long job id", []wire.TaskGroup{group(longest+"j", "v", 1)}, "group 0: a job id of 129 bytes: ids are 1 to 128 bytes"},
		{"long vertex id", []wire.TaskGroup{group("j", "v", 1), group("j", strings.Repeat("v", 100_000), 1)}, "group 1: a vertex id of 100000 bytes"},
		{"empty job id", []wire.TaskGroup{group("", "v", 1)}, "a job id of 0 bytes"},
		{"parallelism 0", []wire.TaskGroup{parallelism(0)}, "parallelism 0 out of range 1..10000"},
		{"parallelism too large", []wire.TaskGroup{parallelism(partition.MaxParallelism + 1)}, "parallelism 10001 out of range"},
		{"not triples", []wire.TaskGroup{notTriples}, "subtasks has 5 numbers, not three per task"},
		{"too many in a group", []wire.TaskGroup{tooWide}, "10001 tasks, at most 10000"},
		{"too many in all", many, "more than 262144 tasks in one deploy"},
	}
	for _, tc := range tests {
		err := checkDeploy(&wire.DeployRequest{Groups: tc.groups})
		require.ErrorContains(t, err, tc.want, tc.name)
		require.Less(t, len(err.Error()), 1000, "%s: the error does not echo an id of any length", tc.name)
	}
}

// A deploy past the bounds is refused (400, naming the bound) before it
// is expanded into tasks: a 10 KiB job id and 10,000 subtask triples,
// about 60 KiB in binary, made 110 MB of execution ids before. A stale
// leader's is refused for its token (409) first. Measured in bytes
// allocated while the request is handled, in binary and in JSON.
func TestAnOversizedDeployIsRefusedBeforeItIsExpanded(t *testing.T) {
	e := startExecutor(t, Config{})
	l := newLeader(t, e, 5)
	l.heartbeat()
	bad := wire.DeployRequest{Leader: l.hdr(), Groups: []wire.TaskGroup{group(strings.Repeat("j", 10<<10), "v", partition.MaxParallelism)}}
	bin := wire.AppendDeploy(nil, &bad)
	js, err := json.Marshal(bad)
	require.NoError(t, err)
	stale := bad
	stale.Token = 4
	staleBin := wire.AppendDeploy(nil, &stale)

	for _, tc := range []struct {
		name, ct string
		body     []byte
		code     int
		want     string
	}{
		{"binary", wire.DeployType, bin, http.StatusBadRequest, "a job id of 10240 bytes: ids are 1 to 128 bytes"},
		{"JSON", "application/json", js, http.StatusBadRequest, "a job id of 10240 bytes: ids are 1 to 128 bytes"},
		{"stale", wire.DeployType, staleBin, http.StatusConflict, "refuses leader"},
	} {
		req := httptest.NewRequest(http.MethodPost, wire.PathDeploy, bytes.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.ct)
		rec := httptest.NewRecorder()
		allocated := allocatedBy(func() { e.serveDeploy(rec, req) })
		// Reading and decoding the body, and no more: 110 MB if expanded.
		require.Less(t, allocated, uint64(4<<20), "%s: %d bytes allocated for a body of %d", tc.name, allocated, len(tc.body))
		answer := rec.Body.String()
		require.Equal(t, tc.code, rec.Code, "%s: %.300s", tc.name, answer)
		require.Contains(t, answer, tc.want, tc.name)
	}
	require.Empty(t, l.heartbeat().Executions, "nothing deployed")
}

// allocatedBy is how many bytes the process allocated while f ran.
func allocatedBy(f func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	f()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
