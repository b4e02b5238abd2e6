package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"jobmaster/acl"
	"jobmaster/wire"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the snapshot fixtures under testdata/")

// fixtureState builds a state that exercises every part of a snapshot: a
// finished job, a running one with a restart behind it, a cancelling one, and
// executions pending and deployed.
func fixtureState(t *testing.T) *State {
	h := newHarness(t)
	h.submit("done", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	h.submit("busy", pipeline)
	h.submit("stop", `{"name":"stop","vertices":[{"id":"v","parallelism":2,"command":["sleep","60"],"env":{"B":"2","A":"1"}}],
		"restart":{"strategy":"failure-rate","max_failures":3,"interval":"1m"}}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "done/v/0/0", State: wire.StateFinished})
	h.report("e1", ReportUpdate{ID: "busy/source/0/0", State: wire.StateRunning}, ReportUpdate{ID: "busy/map/1/0", State: wire.StateFailed, Message: "exit status 1"})
	h.report("e1", ReportUpdate{ID: "busy/source/0/0", State: wire.StateCanceled}, ReportUpdate{ID: "busy/source/1/0", State: wire.StateCanceled},
		ReportUpdate{ID: "busy/map/0/0", State: wire.StateCanceled})
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "busy"})
	h.establish("m2")
	h.placeAll("e2")
	h.report("e2", ReportUpdate{ID: "busy/source/0/1", State: wire.StateRunning})
	h.apply(&CancelJob{Fenced: h.fenced(), ID: "stop"})
	// A pruned tombstone leaves its bucket's attempt floor (format 6).
	h.submit("pruned", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	h.apply(&CancelJob{Fenced: h.fenced(), ID: "pruned"})
	h.apply(&ForgetJobs{Fenced: h.fenced(), IDs: []string{"pruned"}})
	h.now += 1000
	h.apply(&ForgetJobs{Fenced: h.fenced(), PruneBefore: h.now})
	// A forgotten job leaves a tombstone (format 2).
	h.submit("gone", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	h.apply(&CancelJob{Fenced: h.fenced(), ID: "gone"})
	h.apply(&ForgetJobs{Fenced: h.fenced(), IDs: []string{"gone"}})
	// A finished producer leaves a partition (format 4).
	h.submit("data", `{"vertices":[{"id":"gen","parallelism":2,"command":["true"]},
		{"id":"sum","parallelism":1,"command":["true"],"inputs":[{"from":"gen","mode":"blocking"}]}]}`)
	h.placeAll("e3")
	h.report("e3", ReportUpdate{ID: "data/gen/0/0", State: wire.StateFinished, Bytes: 42})
	// ACL tokens, and the bootstrap (format 5).
	require.NoError(t, h.apply(&BootstrapACL{Fenced: h.fenced(), ACLToken: testToken("boot", "root", acl.Management)}).Err)
	require.NoError(t, h.apply(&CreateACLToken{Fenced: h.fenced(), ACLToken: testToken("ci", "ci runner", acl.Submit)}).Err)
	require.NoError(t, h.apply(&CreateACLToken{Fenced: h.fenced(), ACLToken: testToken("old", "", acl.Read)}).Err)
	require.NoError(t, h.apply(&DeleteACLToken{Fenced: h.fenced(), AccessorID: "old"}).Err)
	// Drains (format 6): one by an operator, one an executor asked for.
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1", DeadlineMs: 30000}).Err)
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e9", Self: true, Instance: "abc"}).Err)
	checkInvariants(t, h.s)
	return h.s
}

// dump renders a state for the golden file.
func dump(t *testing.T, s *State) []byte {
	var execs []Execution
	for _, id := range sortedKeys(s.execs) {
		execs = append(execs, *s.execs[id])
	}
	var jobs []*Job
	for _, id := range sortedKeys(s.jobs) {
		jobs = append(jobs, s.jobs[id])
	}
	out := map[string]any{
		"index": s.index, "epoch": s.epoch, "leader": s.leader, "jobs": jobs, "executions": execs,
	}
	if s.cluster != "" {
		out["cluster"] = s.cluster
	}
	if len(s.partitions) > 0 {
		out["partitions"] = s.Partitions()
	}
	if len(s.tokens) > 0 {
		out["tokens"] = s.Tokens()
		out["acl_bootstrap"] = s.aclBootstrap
	}
	if len(s.drains) > 0 {
		out["drains"] = s.Drains()
	}
	if len(s.floors) > 0 {
		out["floors"] = s.Floors()
	}
	if len(s.forgotten) > 0 {
		var tombs []Tombstone
		for _, id := range sortedKeys(s.forgotten) {
			tombs = append(tombs, s.forgotten[id])
		}
		out["tombstones"] = tombs
	}
	b, err := json.MarshalIndent(out, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := fixtureState(t)
	var buf bytes.Buffer
	_, err := s.Capture().WriteTo(&buf)
	require.NoError(t, err)
	r, err := Restore(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	require.Equal(t, s.Capture().Hash(), r.Capture().Hash())
	require.Equal(t, string(dump(t, s)), string(dump(t, r)))
	checkInvariants(t, r)
	// Writing the restored state gives the same bytes.
	var again bytes.Buffer
	_, err = r.Capture().WriteTo(&again)
	require.NoError(t, err)
	require.Equal(t, buf.Bytes(), again.Bytes())
}

// TestSnapshotFixturesRestore: snapshots written by earlier versions keep
// restoring to the same state. A format change adds a new fixture (-update
// writes the current format's) and keeps the old ones.
func TestSnapshotFixturesRestore(t *testing.T) {
	if *update {
		s := fixtureState(t)
		var buf bytes.Buffer
		_, err := s.Capture().WriteTo(&buf)
		require.NoError(t, err)
		name := fmt.Sprintf("snapshot-v%d", snapshotFormat)
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(filepath.Join("testdata", name+".bin"), buf.Bytes(), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join("testdata", name+".json"), dump(t, s), 0o644))
	}
	for v := 1; v <= snapshotFormat; v++ {
		name := fmt.Sprintf("snapshot-v%d", v)
		data, err := os.ReadFile(filepath.Join("testdata", name+".bin"))
		require.NoError(t, err, "every format keeps a fixture")
		want, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		require.NoError(t, err)
		s, err := Restore(bytes.NewReader(data))
		require.NoError(t, err, name)
		require.Equal(t, string(want), string(dump(t, s)), name)
		checkInvariants(t, s)
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	_, err := Restore(bytes.NewReader([]byte{0xc1, 0xc1}))
	require.Error(t, err)
	var buf bytes.Buffer
	c := NewState().Capture()
	c.header.Format = 99
	_, err = c.WriteTo(&buf)
	require.NoError(t, err)
	_, err = Restore(&buf)
	require.ErrorContains(t, err, "snapshot format 99")
}

type memSink struct {
	bytes.Buffer
	canceled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { m.canceled = true; return nil }
func (m *memSink) Close() error  { return nil }

func TestFSMSnapshotAndRestoreThroughRaftInterfaces(t *testing.T) {
	s := fixtureState(t)
	f := New()
	f.state = s
	snap, err := f.Snapshot()
	require.NoError(t, err)
	sink := &memSink{}
	require.NoError(t, snap.Persist(sink))
	snap.Release()

	g := New()
	changed := g.Changed()
	require.NoError(t, g.Restore(ioNopCloser{&sink.Buffer}))
	<-changed
	require.Equal(t, f.Capture().Hash(), g.Capture().Hash())

	// Batches apply in order and answer per entry.
	entry := MustEncode(&CancelJob{Fenced: Fenced{Token: s.Epoch()}, ID: "busy"}, &CancelJob{Fenced: Fenced{Token: 1}, ID: "done"})
	out := g.ApplyBatch([]*raft.Log{
		{Index: s.Index() + 1, Type: raft.LogConfiguration},
		{Index: s.Index() + 2, Type: raft.LogCommand, Data: entry},
	})
	require.Nil(t, out[0])
	rs := out[1].([]Result)
	require.Len(t, rs, 2)
	require.NoError(t, rs[0].Err)
	require.ErrorIs(t, rs[1].Err, ErrStaleToken)
	g.Read(func(st *State) {
		require.Equal(t, s.Index()+2, st.Index())
		v, _ := st.Job("busy")
		require.Equal(t, JobCancelling, v.Status)
	})
}

type ioNopCloser struct{ *bytes.Buffer }

func (ioNopCloser) Close() error { return nil }

// A snapshot cut short says so; one with bytes after its last record (a
// line printed into the backup) is refused whole.
func TestRestoreRefusesCutAndPaddedSnapshots(t *testing.T) {
	var buf bytes.Buffer
	_, err := fixtureState(t).Capture().WriteTo(&buf)
	require.NoError(t, err)
	whole := buf.Bytes()

	_, err = Restore(bytes.NewReader(whole))
	require.NoError(t, err)
	for _, cut := range []int{len(whole) - 1, len(whole) / 2, 20} {
		_, err = RestoreSized(bytes.NewReader(whole[:cut]), int64(cut))
		require.ErrorContains(t, err, "the snapshot is cut short", "cut at %d", cut)
	}
	padded := append(append([]byte(nil), whole...), "Saved 3394 bytes to /dev/stdout\n"...)
	_, err = RestoreSized(bytes.NewReader(padded), int64(len(padded)))
	require.ErrorContains(t, err, "bytes follow its last record")

	// What is no snapshot at all is said to be none, without the decoder's
	// words.
	_, err = RestoreSized(bytes.NewReader([]byte("garbage")), 7)
	require.EqualError(t, err, "not a jobmaster snapshot: its first bytes are not a snapshot's header")
	_, err = RestoreSized(bytes.NewReader(nil), 0)
	require.EqualError(t, err, "not a jobmaster snapshot: it is empty")
}

// A reader that fails is said to, not taken for bytes that are no
// snapshot.
func TestRestoreSaysTheReaderFailed(t *testing.T) {
	broken := errors.New("input/output error")
	_, err := RestoreSized(io.MultiReader(bytes.NewReader([]byte{0x8a}), iotest.ErrReader(broken)), 100)
	require.ErrorIs(t, err, broken)
	require.ErrorContains(t, err, "reading the snapshot: input/output error")
}
