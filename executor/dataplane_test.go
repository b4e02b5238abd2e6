package executor

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/internal/freeport"
	"jobmaster/wire"
)

// dataExecutor starts an exec executor named id on a port of its own and
// a fake leader (token 1) for it.
func dataExecutor(t *testing.T, id string, cfg Config) (*Executor, *leader) {
	t.Helper()
	cfg.NodeID = id
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = freeport.Must(t)
	}
	if cfg.Runtime == "" {
		cfg.Runtime = RuntimeExec
	}
	if cfg.CancelGrace == 0 {
		cfg.CancelGrace = time.Second
	}
	e := startExecutor(t, cfg)
	l := newLeader(t, e, 1)
	l.heartbeat() // the executor learns its fence
	return e, l
}

// dataTaskOf is subtask sub (slot sub) of vertex of job, with parallelism
// par, running script under sh.
func dataTaskOf(job, vertex string, sub, par int, script string) wire.Task {
	return wire.Task{ExecutionID: wire.ExecutionID(job, vertex, sub, 0), JobID: job, Vertex: vertex, Subtask: sub,
		Parallelism: par, Slot: sub, Command: []string{"sh", "-c", script}}
}

// sourcesOn are the sources of attempt 0 of the par subtasks of vertex of
// job, held by e.
func sourcesOn(e *Executor, job, vertex string, par int) []wire.Source {
	var out []wire.Source
	for i := 0; i < par; i++ {
		out = append(out, wire.Source{Subtask: i, Execution: wire.ExecutionID(job, vertex, i, 0), Executor: e.cfg.NodeID, Addr: e.Addr()})
	}
	return out
}

func (l *leader) release(ids ...string) (int, []byte) {
	l.t.Helper()
	return l.post(wire.PathRelease, wire.ReleaseRequest{Leader: l.hdr(), IDs: ids})
}

func (l *leader) partitions() []wire.Partition {
	l.t.Helper()
	code, b := l.do(http.MethodGet, wire.PathPartitions, nil)
	require.Equal(l.t, http.StatusOK, code, "%s", b)
	var ps wire.Partitions
	require.NoError(l.t, json.Unmarshal(b, &ps))
	return ps.Partitions
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

// TestBlockingAllToAllBetweenTwoExecutors: two producers on e1 write a
// file for each of two consumers (and junk the executor must ignore); the
// consumers on e2 find both files complete when they start; the partitions
// stay after their executions were acknowledged; the consumers' inputs are
// deleted when they end.
func TestBlockingAllToAllBetweenTwoExecutors(t *testing.T) {
	t.Parallel()
	rec := &pushRecorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	e1, l1 := dataExecutor(t, "e1", Config{})
	l1.push = strings.TrimPrefix(srv.URL, "http://") // host:port, as masters gossip it
	e2, l2 := dataExecutor(t, "e2", Config{})

	outs := []wire.Output{{Vertex: "sum", Parallelism: 2, Mode: wire.ModeBlocking}}
	var gens []wire.Task
	for i := 0; i < 2; i++ {
		g := dataTaskOf("j", "gen", i, 2, `cd "$JOBMASTER_OUTPUT_DIR"
printf 'g%s-to-0\n' "$JOBMASTER_SUBTASK" > sum/0
printf 'g%s-to-1\n' "$JOBMASTER_SUBTASK" > sum/1
echo junk > sum/notes; echo junk > readme; mkdir -p sum/deep other; echo x > sum/deep/0; echo x > other/0
ln -s /etc/passwd sum/5; mkfifo sum/7`)
		g.Outputs = outs
		gens = append(gens, g)
	}
	l1.deploy(gens...)
	for _, g := range gens {
		st := l1.waitState(g.ExecutionID, wire.StateFinished)
		require.EqualValues(t, 16, st.Bytes, "two files of 8 bytes; the junk does not count")
	}
	waitFor(t, "the pushes to carry both partitions", func() bool {
		n := 0
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, r := range rec.reports {
			n += len(r.Partitions)
		}
		return n == 2
	})
	want := []wire.Partition{
		{ID: "j/gen/0/0", JobID: "j", Vertex: "gen", Subtask: 0, Attempt: 0, Bytes: 16},
		{ID: "j/gen/1/0", JobID: "j", Vertex: "gen", Subtask: 1, Attempt: 0, Bytes: 16},
	}
	rep := l1.heartbeat(gens[0].ExecutionID, gens[1].ExecutionID)
	require.Equal(t, want, rep.Partitions)
	require.Empty(t, l1.heartbeat().Executions, "acknowledged and forgotten")
	require.Equal(t, want, l1.heartbeat().Partitions, "the partitions are kept")
	code, b := l1.do(http.MethodGet, wire.PathPartitions, nil)
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"partitions":[{"id":"j/gen/0/0","job_id":"j","vertex":"gen","subtask":0,"attempt":0,"bytes":16},`+
		`{"id":"j/gen/1/0","job_id":"j","vertex":"gen","subtask":1,"attempt":0,"bytes":16}]}`, string(b))
	pdir := filepath.Join(e1.cfg.DataDir, partitionsDir)
	require.Equal(t, os.FileMode(0o700), mode(t, pdir))
	require.Equal(t, os.FileMode(0o700), mode(t, filepath.Join(pdir, "j", "gen", "0", "0")))
	require.Equal(t, os.FileMode(0o700), mode(t, executionDir(e1.cfg.DataDir, gens[0].ExecutionID)))
	require.False(t, exists(filepath.Join(executionDir(e1.cfg.DataDir, gens[0].ExecutionID), outputDir)), "the output moved")

	ins := []wire.Input{{Vertex: "gen", Mode: wire.ModeBlocking, Sources: sourcesOn(e1, "j", "gen", 2)}}
	var sums []wire.Task
	for j := 0; j < 2; j++ {
		c := dataTaskOf("j", "sum", j, 2, `cd "$JOBMASTER_INPUT_DIR"; [ -f gen/0 ] && [ -f gen/1 ] && cat gen/0 gen/1 && ls gen`)
		c.Inputs = ins
		sums = append(sums, c)
	}
	l2.deploy(sums...)
	for j, c := range sums {
		l2.waitState(c.ExecutionID, wire.StateFinished)
		require.Equal(t, "g0-to-"+strconv.Itoa(j)+"\ng1-to-"+strconv.Itoa(j)+"\n0\n1\n", l2.logs(c.ExecutionID, "stdout"))
		_, in, spool := taskDirs(e2.cfg.DataDir, c.ExecutionID)
		waitFor(t, "the consumer's input to be deleted", func() bool { return !exists(in) && !exists(spool) })
	}
	require.Empty(t, l2.heartbeat().Partitions, "a consumer without outputs leaves no partition")
}

// TestAForwardEdge: on a forward edge a producer's output is only its own
// index, and a consumer reads only the producer of its own index.
func TestAForwardEdge(t *testing.T) {
	t.Parallel()
	e1, l1 := dataExecutor(t, "e1", Config{})
	_, l2 := dataExecutor(t, "e2", Config{})
	var gens, maps []wire.Task
	for i := 0; i < 2; i++ {
		g := dataTaskOf("f", "gen", i, 2, `cd "$JOBMASTER_OUTPUT_DIR/map"; echo "for 0 from $JOBMASTER_SUBTASK" > 0; echo "for 1 from $JOBMASTER_SUBTASK" > 1`)
		g.Outputs = []wire.Output{{Vertex: "map", Parallelism: 2, Mode: wire.ModeBlocking, Forward: true}}
		gens = append(gens, g)
		m := dataTaskOf("f", "map", i, 2, `ls "$JOBMASTER_INPUT_DIR/gen"; cat "$JOBMASTER_INPUT_DIR/gen/$JOBMASTER_SUBTASK"`)
		m.Inputs = []wire.Input{{Vertex: "gen", Mode: wire.ModeBlocking, Forward: true, Sources: sourcesOn(e1, "f", "gen", 2)}}
		maps = append(maps, m)
	}
	l1.deploy(gens...)
	for _, g := range gens {
		require.EqualValues(t, 13, l1.waitState(g.ExecutionID, wire.StateFinished).Bytes, "only its own index counts")
	}
	l2.deploy(maps...)
	for i, m := range maps {
		l2.waitState(m.ExecutionID, wire.StateFinished)
		require.Equal(t, strconv.Itoa(i)+"\nfor "+strconv.Itoa(i)+" from "+strconv.Itoa(i)+"\n", l2.logs(m.ExecutionID, "stdout"))
	}
}

// TestPipelinedStreamsWhileTheProducerRuns: the producer writes a line,
// then waits for the consumer to have read it (a handshake through a named
// pipe) before it writes the rest and ends. Unless the line reaches the
// consumer while the producer runs, neither ends. The consumer is deployed
// first: its producer does not exist yet (404), and the fetch retries.
func TestPipelinedStreamsWhileTheProducerRuns(t *testing.T) {
	t.Parallel()
	e1, l1 := dataExecutor(t, "e1", Config{})
	e2, l2 := dataExecutor(t, "e2", Config{})
	hs := filepath.Join(t.TempDir(), "handshake")
	require.NoError(t, syscall.Mkfifo(hs, 0o600))

	c := dataTaskOf("p", "c", 0, 1, `[ -p "$JOBMASTER_INPUT_DIR/p/0" ] && echo pipe; { read first; echo "got:$first"; echo go > "$HS"; cat; } < "$JOBMASTER_INPUT_DIR/p/0"; [ -e "$JOBMASTER_INPUT_DIR/p/0" ] || echo "read once"`)
	c.Env = map[string]string{"HS": hs}
	c.Inputs = []wire.Input{{Vertex: "p", Mode: wire.ModePipelined, Sources: sourcesOn(e1, "p", "p", 1)}}
	resp := l2.deploy(c)
	require.Equal(t, wire.StateRunning, resp.Executions[0].State, "a pipelined consumer runs without waiting for its producer")

	p := dataTaskOf("p", "p", 0, 1, `printf 'part1\n' >> "$JOBMASTER_OUTPUT_DIR/c/0"; read x < "$HS"; printf 'part2\n' >> "$JOBMASTER_OUTPUT_DIR/c/0"`)
	p.Env = map[string]string{"HS": hs}
	p.Outputs = []wire.Output{{Vertex: "c", Parallelism: 1, Mode: wire.ModePipelined}}
	l1.deploy(p)

	require.EqualValues(t, 12, l1.waitState(p.ExecutionID, wire.StateFinished).Bytes)
	l2.waitState(c.ExecutionID, wire.StateFinished)
	require.Equal(t, "pipe\ngot:part1\npart2\nread once\n", l2.logs(c.ExecutionID, "stdout"))
	require.Equal(t, []wire.Partition{{ID: p.ExecutionID, JobID: "p", Vertex: "p", Bytes: 12}}, l1.partitions(),
		"a pipelined producer's output is kept like a blocking one's")
	_, in, spool := taskDirs(e2.cfg.DataDir, c.ExecutionID)
	waitFor(t, "the consumer's pipes and spool to be deleted", func() bool { return !exists(in) && !exists(spool) })
}

// TestPipelinedInputsReadOneAfterAnother: two producers write 4 MiB each,
// far more than a pipe holds, and end; the consumer reads the second pipe
// to its end, then the first.
func TestPipelinedInputsReadOneAfterAnother(t *testing.T) {
	t.Parallel()
	e1, l1 := dataExecutor(t, "e1", Config{})
	_, l2 := dataExecutor(t, "e2", Config{})
	const size = 4 << 20
	c := dataTaskOf("big", "c", 0, 1, `md5sum < "$JOBMASTER_INPUT_DIR/p/1"; md5sum < "$JOBMASTER_INPUT_DIR/p/0"`)
	c.Inputs = []wire.Input{{Vertex: "p", Mode: wire.ModePipelined, Sources: sourcesOn(e1, "big", "p", 2)}}
	l2.deploy(c)
	var ps []wire.Task
	for i := 0; i < 2; i++ {
		p := dataTaskOf("big", "p", i, 2, `yes "p$JOBMASTER_SUBTASK" | head -c `+strconv.Itoa(size)+` > "$JOBMASTER_OUTPUT_DIR/c/0"`)
		p.Outputs = []wire.Output{{Vertex: "c", Parallelism: 1, Mode: wire.ModePipelined}}
		ps = append(ps, p)
	}
	l1.deploy(ps...)
	l2.waitState(c.ExecutionID, wire.StateFinished)
	sum := func(i int) string {
		line := []byte("p" + strconv.Itoa(i) + "\n")
		h := md5.Sum(bytes.Repeat(line, size/len(line)+1)[:size])
		return hex.EncodeToString(h[:]) + "  -"
	}
	require.Equal(t, sum(1)+"\n"+sum(0)+"\n", l2.logs(c.ExecutionID, "stdout"))
}

func TestReleaseDeletesAPartition(t *testing.T) {
	t.Parallel()
	e, l := dataExecutor(t, "e1", Config{})
	l.token = 5
	l.heartbeat()
	g := dataTaskOf("r", "gen", 0, 1, `echo data > "$JOBMASTER_OUTPUT_DIR/sum/0"`)
	g.Outputs = []wire.Output{{Vertex: "sum", Parallelism: 1, Mode: wire.ModeBlocking}}
	l.deploy(g)
	l.waitState(g.ExecutionID, wire.StateFinished)
	dir := filepath.Join(e.cfg.DataDir, partitionsDir, "r", "gen", "0", "0")
	require.True(t, exists(dir))

	stale := newLeader(t, e, 4)
	code, b := stale.release(g.ExecutionID)
	require.Equal(t, http.StatusConflict, code, "%s", b)
	require.Contains(t, string(b), "stale fencing token 4")
	require.Len(t, l.partitions(), 1, "a stale release deletes nothing")

	code, b = l.release("unknown/v/0/0", g.ExecutionID)
	require.Equal(t, http.StatusNoContent, code, "%s", b)
	require.False(t, exists(dir))
	require.False(t, exists(filepath.Join(e.cfg.DataDir, partitionsDir, "r")), "nor the directories above it")
	require.Empty(t, l.partitions())
	require.Empty(t, l.heartbeat().Partitions)
	code, _ = l.release(g.ExecutionID)
	require.Equal(t, http.StatusNoContent, code, "released twice: the second is ignored")
	code, b = l.do(http.MethodPost, wire.PathRelease, []byte(`{"version":3,"token":5,"ids":"x"}`))
	require.Equal(t, http.StatusBadRequest, code, "%s", b)
}

func TestAProducerThatDoesNotFinishLeavesNothing(t *testing.T) {
	t.Parallel()
	e, l := dataExecutor(t, "e1", Config{})
	outs := []wire.Output{{Vertex: "sum", Parallelism: 1, Mode: wire.ModeBlocking}}
	bad := dataTaskOf("n", "gen", 0, 2, `echo data > "$JOBMASTER_OUTPUT_DIR/sum/0"; exit 4`)
	bad.Outputs = outs
	long := dataTaskOf("n", "gen", 1, 2, `echo data > "$JOBMASTER_OUTPUT_DIR/sum/0"; exec sleep 300`)
	long.Outputs = outs
	l.deploy(bad, long)
	st := l.waitState(bad.ExecutionID, wire.StateFailed)
	require.Equal(t, "exit status 4", st.Message)
	require.Zero(t, st.Bytes)
	l.cancel(long.ExecutionID)
	l.waitState(long.ExecutionID, wire.StateCanceled)
	for _, tk := range []wire.Task{bad, long} {
		out, _, _ := taskDirs(e.cfg.DataDir, tk.ExecutionID)
		waitFor(t, "the output of "+tk.ExecutionID+" to be deleted", func() bool { return !exists(out) })
	}
	require.Empty(t, l.heartbeat().Partitions)
	require.Equal(t, []string{"~staging"}, readDirNames(t, filepath.Join(e.cfg.DataDir, partitionsDir)))
}

func readDirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, ent := range ents {
		out = append(out, ent.Name())
	}
	return out
}

// TestARestartedExecutorReportsItsPartitions: an executor that stops and
// starts again on the same data directory and address reports the
// partitions it kept, and serves them.
func TestARestartedExecutorReportsItsPartitions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := freeport.Must(t)
	cfg := Config{NodeID: "e1", DataDir: dir, HTTPAddr: addr, Runtime: RuntimeExec, Logger: testLogger(t),
		ShimCommand: []string{testBinary(t), shimArg}, CancelGrace: time.Second}
	e1, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, e1.Start())
	l := newLeader(t, e1, 1)
	g := dataTaskOf("rs", "gen", 0, 1, `printf 'kept across restarts' > "$JOBMASTER_OUTPUT_DIR/sum/0"`)
	g.Outputs = []wire.Output{{Vertex: "sum", Parallelism: 1, Mode: wire.ModeBlocking}}
	l.deploy(g)
	l.waitState(g.ExecutionID, wire.StateFinished)
	e1.Crash()

	e1b := startExecutor(t, cfg)
	lb := newLeader(t, e1b, 2)
	rep := lb.heartbeat()
	require.Empty(t, rep.Executions, "executions do not survive their executor")
	require.Equal(t, []wire.Partition{{ID: g.ExecutionID, JobID: "rs", Vertex: "gen", Bytes: 20}}, rep.Partitions, "partitions do")

	_, l2 := dataExecutor(t, "e2", Config{})
	l2.token = 2 // the leader that heartbeats e1b: e1b refuses older fences
	l2.heartbeat()
	c := dataTaskOf("rs", "sum", 0, 1, `cat "$JOBMASTER_INPUT_DIR/gen/0"`)
	c.Inputs = []wire.Input{{Vertex: "gen", Mode: wire.ModeBlocking, Sources: sourcesOn(e1b, "rs", "gen", 1)}}
	l2.deploy(c)
	l2.waitState(c.ExecutionID, wire.StateFinished)
	require.Equal(t, "kept across restarts", l2.logs(c.ExecutionID, "stdout"))
}

// TestAFetchWithAStaleFenceIsRefused: the holder judges a fetch's fence as
// it judges a leader's, but never takes a newer one from it.
func TestAFetchWithAStaleFenceIsRefused(t *testing.T) {
	t.Parallel()
	e, l := dataExecutor(t, "e1", Config{})
	l.cluster, l.token = "c2", 5
	l.heartbeat()
	g := dataTaskOf("s", "gen", 0, 1, `printf abc > "$JOBMASTER_OUTPUT_DIR/sum/0"`)
	g.Outputs = []wire.Output{{Vertex: "sum", Parallelism: 1, Mode: wire.ModeBlocking}}
	l.deploy(g)
	l.waitState(g.ExecutionID, wire.StateFinished)
	fetch := func(cluster, token string) (int, string, http.Header) {
		req, err := http.NewRequest(http.MethodGet, "http://"+e.Addr()+wire.PathPartitionData+"?id="+g.ExecutionID+"&consumer=sum&index=0", nil)
		require.NoError(t, err)
		if cluster != "" {
			req.Header.Set(wire.HeaderCluster, cluster)
		}
		if token != "" {
			req.Header.Set(wire.HeaderToken, token)
		}
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, buf.String(), resp.Trailer
	}
	code, body, _ := fetch("c2", "4")
	require.Equal(t, http.StatusConflict, code)
	var stale wire.StaleToken
	require.NoError(t, json.Unmarshal([]byte(body), &stale))
	require.EqualValues(t, 5, stale.Token)
	require.Contains(t, stale.Error, "stale fencing token 4: the newest seen is 5")

	code, body, trailer := fetch("c2", "9")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "abc", body)
	require.Equal(t, wire.EndComplete, trailer.Get(wire.HeaderEnd))
	require.EqualValues(t, 5, l.executions().FencingToken, "a fetch never moves the fence")
	code, _, _ = fetch("c3", "1")
	require.Equal(t, http.StatusOK, code, "a cluster this executor has not heard of is no reason to refuse")
	l.cluster, l.token = "c3", 1
	l.heartbeat()
	code, body, _ = fetch("c2", "99")
	require.Equal(t, http.StatusConflict, code, "c2 has been replaced: %s", body)
	code, body, _ = fetch("c3", "")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "missing header "+wire.HeaderToken)
}

// TestAnUnavailableSourceFailsItsConsumer: a source that cannot be fetched
// fails its consumer once the bound has passed, naming the producer; the
// deploy answer does not wait for the fetch.
func TestAnUnavailableSourceFailsItsConsumer(t *testing.T) {
	t.Parallel()
	e2, l2 := dataExecutor(t, "e2", Config{FetchTimeout: 300 * time.Millisecond})
	dead := freeport.Must(t)
	src := []wire.Source{{Subtask: 0, Execution: "u/gen/0/0", Executor: "e9", Addr: dead}}
	for _, m := range []string{wire.ModeBlocking, wire.ModePipelined} {
		c := dataTaskOf("u", "sum", 0, 2, `cat "$JOBMASTER_INPUT_DIR/gen/0" > /dev/null && echo end-of-file-seen`)
		if m == wire.ModePipelined {
			c.Subtask, c.ExecutionID, c.Slot = 1, "u/sum/1/0", 1
		}
		c.Inputs = []wire.Input{{Vertex: "gen", Mode: m, Sources: src}}
		resp := l2.deploy(c)
		if m == wire.ModeBlocking {
			require.Equal(t, wire.StateDeploying, resp.Executions[0].State, "the answer did not wait for the fetch")
		}
		st := l2.waitState(c.ExecutionID, wire.StateFailed)
		require.Equal(t, []string{"u/gen/0/0"}, st.Unavailable, m)
		require.Contains(t, st.Message, "input gen/0 (execution u/gen/0/0 on executor e9) unavailable: ", m)
		require.Contains(t, st.Message, "failing for", m)
		require.NotContains(t, l2.logs(c.ExecutionID, "stdout"), "end-of-file-seen", "%s: a broken input is never an end of file", m)
		_, in, _ := taskDirs(e2.cfg.DataDir, c.ExecutionID)
		waitFor(t, "the input directory to be deleted", func() bool { return !exists(in) })
	}
}

// TestAProducerThatFailsMidStreamFailsItsConsumer: a pipelined producer
// writes half its output and fails; its consumer, which was reading, must
// not see an end of file, and fails.
func TestAProducerThatFailsMidStreamFailsItsConsumer(t *testing.T) {
	t.Parallel()
	e1, l1 := dataExecutor(t, "e1", Config{})
	_, l2 := dataExecutor(t, "e2", Config{})
	hs := filepath.Join(t.TempDir(), "handshake")
	require.NoError(t, syscall.Mkfifo(hs, 0o600))
	c := dataTaskOf("m", "c", 0, 1, `{ read first; echo "got:$first"; echo go > "$HS"; cat > /dev/null && echo end-of-file-seen; } < "$JOBMASTER_INPUT_DIR/p/0"`)
	c.Env = map[string]string{"HS": hs}
	c.Inputs = []wire.Input{{Vertex: "p", Mode: wire.ModePipelined, Sources: sourcesOn(e1, "m", "p", 1)}}
	p := dataTaskOf("m", "p", 0, 1, `printf 'half\n' >> "$JOBMASTER_OUTPUT_DIR/c/0"; read x < "$HS"; exit 1`)
	p.Env = map[string]string{"HS": hs}
	p.Outputs = []wire.Output{{Vertex: "c", Parallelism: 1, Mode: wire.ModePipelined}}
	l1.deploy(p)
	l2.deploy(c)
	l1.waitState(p.ExecutionID, wire.StateFailed)
	st := l2.waitState(c.ExecutionID, wire.StateFailed)
	require.Equal(t, "input p/0 (execution m/p/0/0 on executor e1) failed: its producer ended without finishing", st.Message)
	require.Empty(t, st.Unavailable, "the producer failed; its partition was not lost")
	out := l2.logs(c.ExecutionID, "stdout")
	require.Contains(t, out, "got:half")
	require.NotContains(t, out, "end-of-file-seen")
}

func TestBadEdgesAreRefused(t *testing.T) {
	t.Parallel()
	e, l := dataExecutor(t, "e1", Config{})
	src := sourcesOn(e, "j", "gen", 2)
	tests := []struct {
		name string
		mut  func(*wire.Task)
		want string
	}{
		{"output vertex with a slash", func(tk *wire.Task) { tk.Outputs = []wire.Output{{Vertex: "a/b", Parallelism: 1, Mode: "blocking"}} }, "output vertex"},
		{"output vertex dot-dot", func(tk *wire.Task) { tk.Outputs = []wire.Output{{Vertex: "..", Parallelism: 1, Mode: "blocking"}} }, "not allowed"},
		{"output twice", func(tk *wire.Task) {
			tk.Outputs = []wire.Output{{Vertex: "a", Parallelism: 1, Mode: "blocking"}, {Vertex: "a", Parallelism: 1, Mode: "blocking"}}
		}, "listed twice"},
		{"absurd parallelism", func(tk *wire.Task) { tk.Outputs = []wire.Output{{Vertex: "a", Parallelism: 1 << 30, Mode: "blocking"}} }, "out of range"},
		{"zero parallelism", func(tk *wire.Task) { tk.Outputs = []wire.Output{{Vertex: "a", Mode: "blocking"}} }, "out of range"},
		{"unknown mode", func(tk *wire.Task) { tk.Outputs = []wire.Output{{Vertex: "a", Parallelism: 1, Mode: "push"}} }, "mode"},
		{"forward to a smaller vertex", func(tk *wire.Task) {
			tk.Outputs = []wire.Output{{Vertex: "a", Parallelism: 1, Mode: "blocking", Forward: true}}
		}, "no subtask 1"},
		{"too many outputs", func(tk *wire.Task) {
			for i := 0; i <= 1000; i++ {
				tk.Outputs = append(tk.Outputs, wire.Output{Vertex: "v" + strconv.Itoa(i), Parallelism: 1, Mode: "blocking"})
			}
		}, "at most 1000"},
		{"no sources", func(tk *wire.Task) { tk.Inputs = []wire.Input{{Vertex: "gen", Mode: "blocking"}} }, "0 sources"},
		{"input mode", func(tk *wire.Task) { tk.Inputs = []wire.Input{{Vertex: "gen", Mode: "", Sources: src}} }, "mode"},
		{"source listed twice", func(tk *wire.Task) {
			tk.Inputs = []wire.Input{{Vertex: "gen", Mode: "blocking", Sources: []wire.Source{src[0], src[0]}}}
		}, "listed twice"},
		{"source of another vertex", func(tk *wire.Task) {
			s := src[0]
			s.Execution = "j/other/0/0"
			tk.Inputs = []wire.Input{{Vertex: "gen", Mode: "blocking", Sources: []wire.Source{s}}}
		}, "is not of subtask 0 of j/gen"},
		{"source traversal", func(tk *wire.Task) {
			s := src[0]
			s.Execution = "../../0/0"
			tk.Inputs = []wire.Input{{Vertex: "gen", Mode: "blocking", Sources: []wire.Source{s}}}
		}, "execution id"},
		{"source without address", func(tk *wire.Task) {
			s := src[0]
			s.Addr = ""
			tk.Inputs = []wire.Input{{Vertex: "gen", Mode: "blocking", Sources: []wire.Source{s}}}
		}, "address"},
		{"forward without its source", func(tk *wire.Task) {
			tk.Inputs = []wire.Input{{Vertex: "gen", Mode: "blocking", Forward: true, Sources: src[:1]}}
		}, "no source for subtask 1"},
		{"input twice", func(tk *wire.Task) {
			tk.Inputs = []wire.Input{{Vertex: "gen", Mode: "blocking", Sources: src}, {Vertex: "gen", Mode: "blocking", Sources: src}}
		}, "listed twice"},
	}
	for _, tc := range tests {
		tk := dataTaskOf("j", "sum", 1, 2, "true")
		tc.mut(&tk)
		code, b := l.post(wire.PathDeploy, wire.NewDeployRequest(l.hdr(), []wire.Task{tk}))
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", tc.name, b)
		require.Contains(t, string(b), tc.want, tc.name)
	}
	code, b := l.post(wire.PathHeartbeat, wire.HeartbeatRequest{Leader: wire.Leader{Version: wire.Version, Cluster: "a\nb", Token: 1}})
	require.Equal(t, http.StatusBadRequest, code, "a cluster id that would corrupt the token file: %s", b)
	require.Empty(t, l.heartbeat().Executions)

	for _, q := range []string{"", "?id=j/gen/0/0", "?id=j/gen/0/0&consumer=sum&index=01", "?id=j/gen/0/0&consumer=sum&index=10000",
		"?id=j/gen/0/0&consumer=sum&index=0&offset=-1", "?id=j/gen/0/0&consumer=sum&index=0&offset=99999999999999999999",
		"?id=j/gen/0/0&consumer=sum&index=0&follow=yes", "?id=../x/0/0&consumer=sum&index=0", "?id=j/gen/0/0&id=j/gen/1/0&consumer=sum&index=0"} {
		code, b := l.do(http.MethodGet, wire.PathPartitionData+q, nil)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", q, b)
	}
	code, b = l.do(http.MethodPost, wire.PathPartitions, nil)
	require.Equal(t, http.StatusMethodNotAllowed, code, "%s", b)
	_ = strings.TrimSpace
}

// A consumer that closes a pipelined input early (it read what it wanted)
// and runs on: the fetch of that input stops and its spool is freed,
// rather than take the producer's whole output onto the disk, unread.
func TestAPipelinedInputClosedEarlyStopsItsFetch(t *testing.T) {
	t.Parallel()
	e1, l1 := dataExecutor(t, "e1", Config{})
	e2, l2 := dataExecutor(t, "e2", Config{})
	c := dataTaskOf("g", "c", 0, 1, `head -c 1 < "$JOBMASTER_INPUT_DIR/p/0" > /dev/null; sleep 60`)
	c.Inputs = []wire.Input{{Vertex: "p", Mode: wire.ModePipelined, Sources: sourcesOn(e1, "g", "p", 1)}}
	l2.deploy(c)
	const size = 64 << 20
	p := dataTaskOf("g", "p", 0, 1, `head -c 1 /dev/zero > "$JOBMASTER_OUTPUT_DIR/c/0"; sleep 1; head -c `+strconv.Itoa(size)+` /dev/zero >> "$JOBMASTER_OUTPUT_DIR/c/0"`)
	p.Outputs = []wire.Output{{Vertex: "c", Parallelism: 1, Mode: wire.ModePipelined}}
	l1.deploy(p)
	l1.waitState(p.ExecutionID, wire.StateFinished)
	waitFor(t, "the consumer's fetch to end", func() bool {
		e2.mu.Lock()
		defer e2.mu.Unlock()
		dt := e2.data[c.ExecutionID]
		return dt != nil && len(dt.spools) == 1 && dt.spools[0].Ended()
	})
	_, _, spool := taskDirs(e2.cfg.DataDir, c.ExecutionID)
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(filepath.Join(spool, "p", "0"), &st))
	require.Less(t, st.Blocks*512, int64(1<<20), "the spool of a pipe nobody reads holds what the fetch took")
	require.Equal(t, wire.StateRunning, l2.waitState(c.ExecutionID, wire.StateRunning).State, "closing an input is no failure")
}
