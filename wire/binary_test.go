package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func genString(t *rapid.T, label string) string {
	return rapid.StringOfN(rapid.Rune(), 0, 12, -1).Draw(t, label)
}

func genGroup(t *rapid.T) TaskGroup {
	small := rapid.IntRange(-3, 1<<20)
	g := TaskGroup{JobID: genString(t, "job"), Vertex: genString(t, "vertex"), Parallelism: small.Draw(t, "par"),
		Command:   rapid.SliceOfN(rapid.StringN(0, 8, -1), 0, 3).Draw(t, "command"),
		Resources: Resources{CPUMillis: rapid.Int64().Draw(t, "cpu"), MemoryMB: rapid.Int64().Draw(t, "mem")}}
	if len(g.Command) == 0 {
		g.Command = nil
	}
	if env := rapid.MapOfN(rapid.StringN(0, 6, -1), rapid.StringN(0, 6, -1), 0, 3).Draw(t, "env"); len(env) > 0 {
		g.Env = env
	}
	for range rapid.IntRange(0, 2).Draw(t, "outputs") {
		g.Outputs = append(g.Outputs, Output{Vertex: genString(t, "ov"), Parallelism: small.Draw(t, "op"),
			Mode: ModeBlocking, Forward: rapid.Bool().Draw(t, "of")})
	}
	for range rapid.IntRange(0, 2).Draw(t, "inputs") {
		in := Input{Vertex: genString(t, "iv"), Mode: ModePipelined, Forward: rapid.Bool().Draw(t, "if")}
		for range rapid.IntRange(0, 3).Draw(t, "sources") {
			in.Sources = append(in.Sources, Source{Subtask: small.Draw(t, "ss"), Execution: genString(t, "se"),
				Executor: genString(t, "sx"), Addr: genString(t, "sa")})
		}
		g.Inputs = append(g.Inputs, in)
	}
	for range rapid.IntRange(0, 4).Draw(t, "tasks") {
		g.Subtasks = append(g.Subtasks, small.Draw(t, "sub"), small.Draw(t, "att"), small.Draw(t, "slot"))
	}
	return g
}

// Whatever a deploy and its answer hold, the binary format gives back
// exactly what was written, as JSON would (an empty list or map is nil).
func TestPropertyBinaryRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := DeployRequest{Leader: Leader{Version: rapid.IntRange(0, 100).Draw(t, "version"), Cluster: genString(t, "cluster"),
			Token: rapid.Uint64().Draw(t, "token"), Node: genString(t, "node"), Addr: genString(t, "addr")}}
		for range rapid.IntRange(0, 4).Draw(t, "groups") {
			req.Groups = append(req.Groups, genGroup(t))
		}
		got, err := DecodeDeploy(AppendDeploy(nil, &req))
		require.NoError(t, err)
		require.Equal(t, req, got)

		var resp DeployResponse
		for range rapid.IntRange(0, 4).Draw(t, "statuses") {
			resp.Executions = append(resp.Executions, genStatus(t))
		}
		gotResp, err := DecodeDeployResponse(AppendDeployResponse(nil, &resp))
		require.NoError(t, err)
		require.Equal(t, resp, gotResp)

		rep := genReport(t)
		gotRep, err := DecodeReport(AppendReport(nil, &rep))
		require.NoError(t, err)
		require.Equal(t, rep, gotRep)
	})
}

func genStatus(t *rapid.T) ExecutionStatus {
	s := ExecutionStatus{ExecutionID: genString(t, "id"), JobID: genString(t, "sj"), Vertex: genString(t, "sv"),
		Subtask: rapid.IntRange(0, 1<<20).Draw(t, "s"), Attempt: rapid.IntRange(0, 1<<20).Draw(t, "a"),
		Slot: rapid.IntRange(0, MaxSlots).Draw(t, "slot"), State: StateRunning, Message: genString(t, "msg"),
		Bytes: rapid.Int64().Draw(t, "bytes")}
	if u := rapid.SliceOfN(rapid.StringN(0, 8, -1), 0, 2).Draw(t, "unavailable"); len(u) > 0 {
		s.Unavailable = u
	}
	return s
}

func genReport(t *rapid.T) Report {
	r := Report{Version: rapid.IntRange(0, 100).Draw(t, "version"), Executor: genString(t, "executor"),
		Instance: genString(t, "instance"), Token: rapid.Uint64().Draw(t, "token"),
		Slots: rapid.IntRange(0, MaxSlots).Draw(t, "slots"), UsedSlots: rapid.IntRange(0, MaxSlots).Draw(t, "used"),
		LeaseMs: rapid.Int64().Draw(t, "lease"), Partial: rapid.Bool().Draw(t, "partial"),
		DiskFull: rapid.Bool().Draw(t, "full"), StorageError: genString(t, "storage"),
		CPUMillis: rapid.Int64().Draw(t, "cpu"), MemoryMB: rapid.Int64().Draw(t, "mem")}
	for range rapid.IntRange(0, 4).Draw(t, "statuses") {
		r.Executions = append(r.Executions, genStatus(t))
	}
	for range rapid.IntRange(0, 3).Draw(t, "partitions") {
		r.Partitions = append(r.Partitions, Partition{ID: genString(t, "pid"), JobID: genString(t, "pj"), Vertex: genString(t, "pv"),
			Subtask: rapid.IntRange(0, 1<<20).Draw(t, "ps"), Attempt: rapid.IntRange(0, 1<<20).Draw(t, "pa"),
			Bytes: rapid.Int64().Draw(t, "pb")})
	}
	return r
}

// Every field of a report, execution status and partition travels in
// binary: a field added to one of them and not to the format fails here.
func TestReportBinaryCarriesEveryField(t *testing.T) {
	full := Report{Version: 1, Executor: "x", Instance: "i", Token: 2, Slots: 3, UsedSlots: 4, LeaseMs: 5, Partial: true,
		Executions: []ExecutionStatus{{ExecutionID: "j/v/0/0", JobID: "j", Vertex: "v", Subtask: 1, Attempt: 2, Slot: 3,
			State: StateFailed, Message: "m", Bytes: 4, Unavailable: []string{"p"}}},
		Partitions: []Partition{{ID: "j/v/0/0", JobID: "j", Vertex: "v", Subtask: 1, Attempt: 2, Bytes: 3}},
		DiskFull:   true, StorageError: "e", CPUMillis: 6, MemoryMB: 7}
	for _, v := range []reflect.Value{reflect.ValueOf(full), reflect.ValueOf(full.Executions[0]), reflect.ValueOf(full.Partitions[0])} {
		for i := range v.NumField() {
			require.False(t, v.Field(i).IsZero(), "%s.%s is not set here: set it, and carry it in AppendReport and DecodeReport",
				v.Type().Name(), v.Type().Field(i).Name)
		}
	}
	got, err := DecodeReport(AppendReport(nil, &full))
	require.NoError(t, err)
	require.Equal(t, full, got)
}

// Bodies that are not what was written are refused with an error that
// says so, never a panic: cut anywhere, with bytes after the end, the
// other message's kind, counts and lengths beyond the body, numbers out of
// range.
func TestBinaryRefusesMalformed(t *testing.T) {
	req := DeployRequest{Leader: Leader{Version: Version, Token: 3, Node: "m1"}, Groups: []TaskGroup{{JobID: "j", Vertex: "v",
		Parallelism: 2, Command: []string{"true"}, Env: map[string]string{"A": "b"}, Subtasks: []int{0, 0, 1, 1, 0, 2}}}}
	data := AppendDeploy(nil, &req)
	for n := range len(data) {
		_, err := DecodeDeploy(data[:n])
		require.ErrorIs(t, err, errBinary, "cut at %d", n)
	}
	rep := AppendReport(nil, &Report{Version: Version, Executor: "x", Executions: []ExecutionStatus{{ExecutionID: "j/v/0/0", State: StateRunning}},
		Partitions: []Partition{{ID: "j/v/0/0"}}})
	for n := range len(rep) {
		_, err := DecodeReport(rep[:n])
		require.ErrorIs(t, err, errBinary, "report cut at %d", n)
	}
	_, err := DecodeDeploy(append(data[:len(data):len(data)], 0))
	require.ErrorContains(t, err, "1 bytes after the end")
	_, err = DecodeDeployResponse(data)
	require.ErrorContains(t, err, "not the expected message")

	huge := binary.AppendUvarint([]byte{kindDeployResponse}, 1<<40)
	_, err = DecodeDeployResponse(huge)
	require.ErrorContains(t, err, "elements in 0 bytes")

	long := binary.AppendUvarint(append([]byte{kindDeploy}, 0), 1<<30) // the cluster's length
	_, err = DecodeDeploy(long)
	require.ErrorContains(t, err, "a string of 1073741824 bytes in 0")

	var out []byte
	out = append(out, kindDeploy)
	out = binary.AppendVarint(out, 1<<40) // the version
	_, err = DecodeDeploy(out)
	require.ErrorContains(t, err, "out of range")

	overlong := append([]byte{kindDeploy}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)
	_, err = DecodeDeploy(overlong)
	require.True(t, errors.Is(err, errBinary))
}

// What a body makes is bounded by its size: the largest count that a
// megabyte can claim allocates a bounded multiple of it, not what the
// count says.
func TestBinaryAllocationIsBoundedByTheBody(t *testing.T) {
	const body = 1 << 20
	claim := func(prefix []byte, n uint64) []byte {
		b := binary.AppendUvarint(prefix, n)
		return append(b, make([]byte, body)...)
	}
	leaderOnly := AppendDeploy(nil, &DeployRequest{})
	leaderOnly = leaderOnly[:len(leaderOnly)-1] // without its group count
	cases := map[string][]byte{
		// As many groups, or statuses, as a megabyte can hold: zeros
		// make empty ones, and the few bytes left over are refused.
		"groups":   claim(leaderOnly, body/minGroup),
		"statuses": claim([]byte{kindDeployResponse}, body/minStatus),
		// A report with no statuses and as many empty partitions as a
		// megabyte holds.
		"partitions": claim(reportPrefix(), body/minPartition),
	}
	for name, data := range cases {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var err error
		switch name {
		case "groups":
			_, err = DecodeDeploy(data)
		case "statuses":
			_, err = DecodeDeployResponse(data)
		default:
			_, err = DecodeReport(data)
		}
		runtime.ReadMemStats(&after)
		if name == "partitions" {
			require.NoError(t, err, "the 4 bytes left over are the report's last 4 fields")
		} else {
			require.ErrorContains(t, err, "bytes after the end", name)
		}
		allocated := after.TotalAlloc - before.TotalAlloc
		require.Less(t, allocated, uint64(20*body), "%s: %d bytes allocated for a %d-byte body", name, allocated, len(data))
	}
}

// A deploy split for the binary format fits its limit in that format,
// holds every task once, in order, and takes fewer requests than JSON.
func TestSplitDeployBinary(t *testing.T) {
	l := Leader{Version: Version, Cluster: "c", Token: 7, Node: "m1", Addr: "127.0.0.1:7401"}
	env := map[string]string{"BIG": strings.Repeat("e", 100<<10)}
	var tasks []Task
	for v := range 3 {
		for i := range 2000 {
			tasks = append(tasks, Task{ExecutionID: ExecutionID("j", fmt.Sprintf("v%d", v), i, 0), JobID: "j", Vertex: fmt.Sprintf("v%d", v),
				Subtask: i, Parallelism: 2000, Slot: i % 8, Command: []string{"sh", "-c", strings.Repeat("c", 50<<10)}, Env: env})
		}
	}
	for _, limit := range []int{0, 200 << 10, 400 << 10} {
		want := limit
		if want == 0 {
			want = MaxDeployBytes
		}
		reqs := SplitDeployBinary(l, tasks, limit)
		var got []Task
		for _, r := range reqs {
			require.LessOrEqual(t, len(AppendDeploy(nil, &r)), want, "limit %d", limit)
			ts, err := r.Tasks()
			require.NoError(t, err)
			got = append(got, ts...)
		}
		require.Equal(t, tasks, got, "every task once, in order (limit %d)", limit)
	}
	// Many small groups, each a job of its own: the size of every count
	// grows past one byte.
	tasks = tasks[:0]
	for j := range 40000 {
		tasks = append(tasks, Task{JobID: fmt.Sprintf("job-%05d", j), Vertex: "v", Subtask: j % 10, Parallelism: 10,
			Slot: j % MaxSlots, Command: []string{"sim"}, Env: map[string]string{"SIM_DURATION": "1h"}})
	}
	for _, r := range SplitDeployBinary(l, tasks, 100<<10) {
		require.LessOrEqual(t, len(AppendDeploy(nil, &r)), 100<<10)
	}
	require.Less(t, len(SplitDeployBinary(l, tasks, 100<<10)), len(SplitDeploy(l, tasks, 100<<10)))
}

// reportPrefix is a report's binary form up to its partition count.
func reportPrefix() []byte {
	b := AppendReport(nil, &Report{})
	// An empty report ends in the partition count (0), DiskFull (0), the
	// storage error's length (0), CPUMillis (0) and MemoryMB (0).
	return b[:len(b)-5]
}

func FuzzDecodeDeploy(f *testing.F) {
	f.Add(AppendDeploy(nil, &DeployRequest{Leader: Leader{Version: Version, Node: "m"}, Groups: []TaskGroup{{JobID: "j",
		Vertex: "v", Command: []string{"x"}, Env: map[string]string{"a": "b"}, Subtasks: []int{0, 0, 1}}}}))
	f.Add(AppendDeployResponse(nil, &DeployResponse{Executions: []ExecutionStatus{{ExecutionID: "j/v/0/0", State: StateRunning}}}))
	f.Add(AppendReport(nil, &Report{Version: Version, Executor: "x", Executions: []ExecutionStatus{{ExecutionID: "j/v/0/0", State: StateRunning}},
		Partitions: []Partition{{ID: "j/v/0/0", Bytes: 9}}, StorageError: "e"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := DecodeReport(data); err == nil {
			again, err := DecodeReport(AppendReport(nil, &r))
			require.NoError(t, err)
			require.Equal(t, r, again)
		}
		if r, err := DecodeDeploy(data); err == nil {
			again, err := DecodeDeploy(AppendDeploy(nil, &r))
			require.NoError(t, err)
			require.Equal(t, r, again)
		}
		if r, err := DecodeDeployResponse(data); err == nil {
			again, err := DecodeDeployResponse(AppendDeployResponse(nil, &r))
			require.NoError(t, err)
			require.Equal(t, r, again)
		}
	})
}

// A heartbeat's answer is binary only when the Accept header takes a
// binary report of this revision with a quality above zero; a report's
// Content-Type is read the same way.
func TestAcceptsReport(t *testing.T) {
	for accept, want := range map[string]bool{
		AcceptReport: true,
		ReportType:   true,
		"Application/Octet-Stream; report=1; q=0.1":     true,
		"text/html, application/octet-stream; report=1": true,
		BinaryType:                           false, // no revision: a deploy's type
		"application/octet-stream; report=2": false,
		"application/json":                   false,
		"":                                   false,
		"*/*":                                false,
		"application/octet-stream; report=1; q=0":     false,
		"application/octet-stream; report=1; q=0.000": false,
		"application/octet-stream; report=1; q=x":     false,
	} {
		require.Equal(t, want, AcceptsReport([]string{accept}), "%q", accept)
	}
	require.True(t, AcceptsReport([]string{"application/json", ReportType}), "over two headers")
	require.True(t, IsReport(ReportType))
	require.True(t, IsReport("application/octet-stream;report=1"))
	require.False(t, IsReport("application/octet-stream; report=2"))
	require.False(t, IsReport(BinaryType))
	require.True(t, IsBinary("application/octet-stream; report=2"))
	require.False(t, IsBinary("application/json"))
}

// ReportExecutor reads the executor's name of a report alone, and refuses
// what is not a report.
func TestReportExecutor(t *testing.T) {
	b := AppendReport(nil, &Report{Version: Version, Executor: "e7", Executions: []ExecutionStatus{{ExecutionID: "j/v/0/0"}}})
	name, err := ReportExecutor(b)
	require.NoError(t, err)
	require.Equal(t, "e7", name)
	_, err = ReportExecutor(b[:3])
	require.ErrorIs(t, err, errBinary)
	_, err = ReportExecutor(AppendDeployResponse(nil, &DeployResponse{}))
	require.ErrorIs(t, err, errBinary)
}

// A binary deploy is read when it names this revision or none (the first,
// from a leader of the release before revisions).
func TestIsDeploy(t *testing.T) {
	require.True(t, IsDeploy(DeployType))
	require.True(t, IsDeploy(BinaryType))
	require.True(t, IsDeploy("Application/Octet-Stream;deploy=1"))
	require.False(t, IsDeploy("application/octet-stream; deploy=2"))
	require.False(t, IsDeploy("application/json"))
	require.False(t, IsDeploy(""))
}

// A report past its bounds is refused whole, in binary before its entries
// are made, and as JSON by CheckBounds: 6.5 million empty statuses in 65
// MB once took a leader to gigabytes.
func TestReportPastItsBoundsIsRefused(t *testing.T) {
	empty := make([]ExecutionStatus, MaxReportExecutions+1)
	data := AppendReport(nil, &Report{Version: Version, Executor: "e1", Executions: empty})
	_, err := DecodeReport(data)
	require.ErrorContains(t, err, fmt.Sprintf("%d executions, at most %d are read", MaxReportExecutions+1, MaxReportExecutions))
	r := Report{Executions: empty}
	require.ErrorContains(t, r.CheckBounds(), "executions, at most")

	parts := Report{Version: Version, Executor: "e1", Partitions: make([]Partition, MaxReportPartitions+1)}
	_, err = DecodeReport(AppendReport(nil, &parts))
	require.ErrorContains(t, err, "partitions, at most")
	require.ErrorContains(t, parts.CheckBounds(), "partitions, at most")

	unav := Report{Version: Version, Executor: "e1", Executions: []ExecutionStatus{{ExecutionID: "j/v/0/0", State: StateFailed, Unavailable: make([]string, MaxUnavailable+1)}}}
	_, err = DecodeReport(AppendReport(nil, &unav))
	require.ErrorContains(t, err, "unavailable partitions, at most")
	require.ErrorContains(t, unav.CheckBounds(), "unavailable partitions, at most")

	// Unavailable partitions are bounded in the whole report too.
	many := Report{Version: Version, Executor: "e1"}
	for i := 0; i <= MaxReportUnavailable/MaxUnavailable; i++ {
		many.Executions = append(many.Executions, ExecutionStatus{ExecutionID: fmt.Sprintf("j/v/%d/0", i), State: StateFailed, Unavailable: make([]string, MaxUnavailable)})
	}
	_, err = DecodeReport(AppendReport(nil, &many))
	require.ErrorContains(t, err, "unavailable partitions, at most")
	require.ErrorContains(t, many.CheckBounds(), "unavailable partitions in all")

	// JSON is counted before it is decoded.
	require.NoError(t, CheckJSONReport([]byte(`{"executions":[{},{}]}`)))
	require.ErrorContains(t, CheckJSONReport(append([]byte(`{"executions":[`), bytes.Repeat([]byte(`{},`), MaxJSONReportObjects)...)), "objects, at most")

	atBounds := Report{Version: Version, Executor: "e1", Executions: empty[:MaxReportExecutions], Partitions: parts.Partitions[:MaxReportPartitions]}
	got, err := DecodeReport(AppendReport(nil, &atBounds))
	require.NoError(t, err)
	require.NoError(t, got.CheckBounds())
	require.Len(t, got.Executions, MaxReportExecutions)
}
