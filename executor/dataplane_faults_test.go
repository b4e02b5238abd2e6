package executor

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/executor/partition"
	"jobmaster/internal/freeport"
	"jobmaster/wire"
)

// cuttingProxy forwards TCP connections to target; each of the first cuts
// connections is closed after at most limit bytes of the answer.
type cuttingProxy struct {
	ln     net.Listener
	target string
	limit  int64

	mu    sync.Mutex
	cuts  int
	conns int
	open  []net.Conn
	wg    sync.WaitGroup
}

// close stops the proxy and every connection through it (the peers keep
// idle connections open).
func (p *cuttingProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func startCuttingProxy(t *testing.T, target string, limit int64, cuts int) *cuttingProxy {
	ln, err := net.Listen("tcp", freeport.Must(t))
	require.NoError(t, err)
	p := &cuttingProxy{ln: ln, target: target, limit: limit, cuts: cuts}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *cuttingProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cuts > 0
		if cut {
			p.cuts--
		}
		p.conns++
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer c.Close()
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				return
			}
			defer s.Close()
			p.mu.Lock()
			p.open = append(p.open, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c) }()
			if cut {
				_, _ = io.CopyN(c, s, p.limit)
				return // both ends close: the answer breaks off
			}
			_, _ = io.Copy(c, s)
		}()
	}
}

// TestAFetchCutMidwayBetweenExecutors: the connection from the consumer's
// executor to the producer's breaks off twice in the middle of a 1 MiB
// partition; the consumer reads it whole, once.
func TestAFetchCutMidwayBetweenExecutors(t *testing.T) {
	t.Parallel()
	e1, l1 := dataExecutor(t, "e1", Config{})
	_, l2 := dataExecutor(t, "e2", Config{})
	g := dataTaskOf("cut", "gen", 0, 1, `head -c 1048576 /dev/urandom > "$JOBMASTER_OUTPUT_DIR/sum/0"`)
	g.Outputs = []wire.Output{{Vertex: "sum", Parallelism: 1, Mode: wire.ModeBlocking}}
	l1.deploy(g)
	require.EqualValues(t, 1<<20, l1.waitState(g.ExecutionID, wire.StateFinished).Bytes)
	data, err := os.ReadFile(filepath.Join(e1.cfg.DataDir, partitionsDir, "cut", "gen", "0", "0", "data", "sum", "0"))
	require.NoError(t, err)
	want := md5.Sum(data)

	proxy := startCuttingProxy(t, e1.Addr(), 300_000, 2)
	src := sourcesOn(e1, "cut", "gen", 1)
	src[0].Addr = proxy.ln.Addr().String()
	c := dataTaskOf("cut", "sum", 0, 1, `wc -c < "$JOBMASTER_INPUT_DIR/gen/0"; md5sum < "$JOBMASTER_INPUT_DIR/gen/0"`)
	c.Inputs = []wire.Input{{Vertex: "gen", Mode: wire.ModeBlocking, Sources: src}}
	l2.deploy(c)
	l2.waitState(c.ExecutionID, wire.StateFinished)
	require.Equal(t, "1048576\n"+hex.EncodeToString(want[:])+"  -\n", l2.logs(c.ExecutionID, "stdout"))
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	require.Equal(t, 0, proxy.cuts, "both cuts happened")
	require.GreaterOrEqual(t, proxy.conns, 3, "and were resumed")
}

// TestSimTasksAndTheirPartitions: a sim producer leaves an empty partition;
// a sim consumer reads nothing unless asked to (SimFetchEnv), and then
// fails like an exec one when a source is unavailable.
func TestSimTasksAndTheirPartitions(t *testing.T) {
	t.Parallel()
	e1, l1 := dataExecutor(t, "s1", Config{Runtime: RuntimeSim})
	_, l2 := dataExecutor(t, "s2", Config{Runtime: RuntimeSim, FetchTimeout: 200 * time.Millisecond})
	var gens []wire.Task
	for i := 0; i < 2; i++ {
		g := simTask("sim", i, 0, 0)
		g.Vertex, g.ExecutionID, g.Parallelism = "gen", wire.ExecutionID("sim", "gen", i, 0), 2
		g.Outputs = []wire.Output{{Vertex: "sum", Parallelism: 2, Mode: wire.ModePipelined}}
		gens = append(gens, g)
	}
	l1.deploy(gens...)
	for _, g := range gens {
		l1.waitState(g.ExecutionID, wire.StateFinished)
	}
	require.Equal(t, []wire.Partition{{ID: "sim/gen/0/0", JobID: "sim", Vertex: "gen"}, {ID: "sim/gen/1/0", JobID: "sim", Vertex: "gen", Subtask: 1}},
		l1.heartbeat().Partitions)
	require.False(t, exists(filepath.Join(e1.cfg.DataDir, "executions")), "a sim task has no directory")

	consumer := func(sub int, fetch bool, sources []wire.Source) wire.Task {
		c := simTask("sim", sub, 0, 0)
		c.Vertex, c.ExecutionID, c.Parallelism = "sum", wire.ExecutionID("sim", "sum", sub, 0), 4
		c.Inputs = []wire.Input{{Vertex: "gen", Mode: wire.ModeBlocking, Sources: sources}}
		if fetch {
			c.Env[SimFetchEnv] = "1"
		}
		return c
	}
	dead := []wire.Source{{Subtask: 0, Execution: "sim/gen/0/0", Executor: "gone", Addr: freeport.Must(t)}}
	reads := consumer(0, true, sourcesOn(e1, "sim", "gen", 2))
	skips := consumer(1, false, dead)
	fails := consumer(2, true, dead)
	l2.deploy(reads, skips, fails)
	l2.waitState(reads.ExecutionID, wire.StateFinished)
	l2.waitState(skips.ExecutionID, wire.StateFinished)
	st := l2.waitState(fails.ExecutionID, wire.StateFailed)
	require.Equal(t, []string{"sim/gen/0/0"}, st.Unavailable)
	require.Contains(t, st.Message, "input gen/0 (execution sim/gen/0/0 on executor gone) unavailable")

	bad := consumer(3, false, dead)
	bad.Env[SimFetchEnv] = "maybe"
	st = l2.deploy(bad).Executions[0]
	require.Equal(t, wire.StateFailed, st.State)
	require.Contains(t, st.Message, "SIM_FETCH")
}

// TestAnExecutorSweepsWhatADeadOneLeft: output, input and spool
// directories in execution directories are deleted when an executor
// starts; logs and partitions stay.
func TestAnExecutorSweepsWhatADeadOneLeft(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	x := executionDir(dir, "old/v/0/0")
	for _, p := range []string{outputDir + "/c/0", inputDir + "/p/0", spoolDir + "/p/0", "stdout.log", "own/output"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(x, p)), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(x, p), []byte("x"), 0o600))
	}
	startExecutor(t, Config{DataDir: dir, Runtime: RuntimeExec})
	require.Equal(t, []string{"own", "stdout.log"}, readDirNames(t, x))
}

func TestParseFetch(t *testing.T) {
	hdr := http.Header{}
	hdr.Set(wire.HeaderToken, "7")
	hdr.Set(wire.HeaderCluster, "abc123")
	q, err := parseFetch(url.Values{"id": {"j/gen/2/0"}, "consumer": {"sum"}, "index": {"3"}, "offset": {"1000"}, "follow": {"1"}}, hdr)
	require.NoError(t, err)
	require.Equal(t, fetchRequest{Request: partition.Request{Producer: "j/gen/2/0", Consumer: "sum", Index: 3, Offset: 1000, Follow: true}, Cluster: "abc123", Token: 7}, q)
	q, err = parseFetch(partition.Query(partition.Source{Producer: "j/gen/2/0", Consumer: "sum", Index: 0}, 0), hdr)
	require.NoError(t, err, "what the fetcher sends parses")
	require.False(t, q.Follow)

	ok := url.Values{"id": {"j/gen/2/0"}, "consumer": {"sum"}, "index": {"3"}}
	with := func(k, v string) url.Values {
		out := url.Values{}
		for kk, vv := range ok {
			out[kk] = vv
		}
		if v == "" {
			delete(out, k)
		} else {
			out.Set(k, v)
		}
		return out
	}
	tests := []struct {
		v    url.Values
		h    http.Header
		want string
	}{
		{with("id", ""), hdr, "missing query parameter id"},
		{with("id", "j/gen/x/0"), hdr, "canonical"},
		{with("id", "j/../2/0"), hdr, "not allowed"},
		{with("consumer", ""), hdr, "consumer"},
		{with("consumer", "a/b"), hdr, "consumer"},
		{with("index", ""), hdr, "index"},
		{with("index", "-1"), hdr, "index"},
		{with("index", "10000"), hdr, "index"},
		{with("offset", "-5"), hdr, "offset"},
		{with("offset", fmt.Sprint(int64(partition.MaxOffset)+1)), hdr, "offset"},
		{with("offset", "1e3"), hdr, "offset"},
		{with("follow", "true"), hdr, "follow"},
		{url.Values{"id": {"j/gen/2/0", "j/gen/3/0"}, "consumer": {"sum"}, "index": {"3"}}, hdr, "given 2 times"},
		{ok, http.Header{}, "missing header"},
		{ok, http.Header{wire.HeaderToken: {"-1"}}, "want a fencing token"},
		{ok, http.Header{wire.HeaderToken: {"1"}, wire.HeaderCluster: {strings.Repeat("c", 129)}}, "longer than 128"},
		{ok, http.Header{wire.HeaderToken: {"1"}, wire.HeaderCluster: {"a b"}}, "only [A-Za-z0-9._-]"},
	}
	for _, tc := range tests {
		_, err := parseFetch(tc.v, tc.h)
		require.ErrorContains(t, err, tc.want, "%v %v", tc.v, tc.h)
	}
}

func TestDiskFull(t *testing.T) {
	require.True(t, diskFull(&os.PathError{Op: "write", Err: syscall.ENOSPC}, 1<<30))
	require.True(t, diskFull(fmt.Errorf("wrapped: %w", syscall.EDQUOT), -1))
	require.True(t, diskFull(nil, 4096), "almost nothing left")
	require.False(t, diskFull(nil, 1<<30))
	require.False(t, diskFull(nil, -1), "unknown")
	require.False(t, diskFull(syscall.EIO, 1<<30))
}

// TestAFullDiskFailsWhatNeedsSpaceAndNothingElse: a producer fills the
// data directory's filesystem and keeps running. Tasks that then need
// space fail saying why; the executor goes on: another task keeps
// running, a new leader is followed (its token stored), the lease is
// renewed. When the filler is cancelled, its output is deleted and the
// disk is usable again.
func TestAFullDiskFailsWhatNeedsSpaceAndNothingElse(t *testing.T) {
	dir := filepath.Join(tmpfs(t, "8m"), "e1")
	_, l := dataExecutor(t, "e1", Config{DataDir: dir})
	e2, l2 := dataExecutor(t, "e2", Config{})
	outs := []wire.Output{{Vertex: "sum", Parallelism: 1, Mode: wire.ModeBlocking}}

	other := dataTaskOf("d", "other", 0, 1, "exec sleep 300")
	filler := dataTaskOf("d", "fill", 0, 1, `cat /dev/zero > "$JOBMASTER_OUTPUT_DIR/sum/0"; exec sleep 300`)
	filler.Slot = 1
	filler.Outputs = outs
	l.deploy(other, filler)
	waitFor(t, "the disk to be full", func() bool { return diskFull(nil, availBytes(dir)) })

	late := dataTaskOf("d", "late", 0, 1, `echo data > "$JOBMASTER_OUTPUT_DIR/sum/0"`)
	late.Slot = 2
	late.Outputs = outs
	l.deploy(late)
	st := l.waitState(late.ExecutionID, wire.StateFailed)
	require.Contains(t, st.Message, "disk full: no space left on the filesystem of "+dir)

	g := dataTaskOf("d", "gen", 0, 1, `head -c 1048576 /dev/zero > "$JOBMASTER_OUTPUT_DIR/sum/0"`)
	g.Outputs = outs
	l2.deploy(g)
	l2.waitState(g.ExecutionID, wire.StateFinished)
	c := dataTaskOf("d", "sum", 0, 1, "true")
	c.Slot = 3
	c.Inputs = []wire.Input{{Vertex: "gen", Mode: wire.ModeBlocking, Sources: sourcesOn(e2, "d", "gen", 1)}}
	l.deploy(c)
	st = l.waitState(c.ExecutionID, wire.StateFailed)
	require.Contains(t, st.Message, "input gen/0 (execution d/gen/0/0 on executor e2): storing the input: ")
	require.Contains(t, st.Message, "disk full")
	require.Empty(t, st.Unavailable, "the partition is fine: the disk here is full")

	before, ok := readLeaseFile(filepath.Join(dir, leaseFileName))
	require.True(t, ok)
	l.token = 2 // a new leader
	rep := l.heartbeat()
	require.EqualValues(t, 2, rep.Token)
	fc, err := loadFence(dir)
	require.NoError(t, err)
	require.EqualValues(t, 2, fc.Token, "its token is on disk")
	after, ok := readLeaseFile(filepath.Join(dir, leaseFileName))
	require.True(t, ok)
	require.Greater(t, after, before, "the lease file was renewed")
	st, _ = status(rep.Executions, other.ExecutionID)
	require.Equal(t, wire.StateRunning, st.State, "the other task runs on")

	l.cancel(filler.ExecutionID)
	l.waitState(filler.ExecutionID, wire.StateCanceled)
	waitFor(t, "the filler's output to be deleted", func() bool { return !diskFull(nil, availBytes(dir)) })
	again := dataTaskOf("d", "again", 0, 1, `echo data > "$JOBMASTER_OUTPUT_DIR/sum/0"`)
	again.Slot = 1
	again.Outputs = outs
	l.deploy(again)
	require.EqualValues(t, 5, l.waitState(again.ExecutionID, wire.StateFinished).Bytes)
}

// TestACancelOrAShutdownStopsAFetchInFlight: a consumer whose source does
// not answer waits in DEPLOYING; a cancel ends it at once, and so does a
// shutdown, long before the fetch would give up.
func TestACancelOrAShutdownStopsAFetchInFlight(t *testing.T) {
	t.Parallel()
	rec := &pushRecorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	e, l := dataExecutor(t, "e1", Config{FetchTimeout: time.Hour})
	l.push = strings.TrimPrefix(srv.URL, "http://") // host:port, as masters gossip it
	l.heartbeat()
	src := []wire.Source{{Subtask: 0, Execution: "w/gen/0/0", Executor: "e9", Addr: freeport.Must(t)}}
	var cs []wire.Task
	for i := 0; i < 2; i++ {
		c := dataTaskOf("w", "sum", i, 2, "true")
		c.Inputs = []wire.Input{{Vertex: "gen", Mode: wire.ModeBlocking, Sources: src}}
		cs = append(cs, c)
	}
	for _, st := range l.deploy(cs...).Executions {
		require.Equal(t, wire.StateDeploying, st.State)
	}
	l.cancel(cs[0].ExecutionID)
	require.Equal(t, "canceled by the leader", l.waitState(cs[0].ExecutionID, wire.StateCanceled).Message)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, e.Shutdown(ctx))
	st, _, ok := rec.latest(cs[1].ExecutionID)
	require.True(t, ok)
	require.Equal(t, wire.StateCanceled, st.State)
	require.Equal(t, "executor shutting down", st.Message)
}

// An executor says in its own log when its disk turns full and when it
// clears, once each (the leader places nothing there meanwhile).
func TestDiskFullIsLoggedOnItsChanges(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	e := startExecutor(t, Config{Runtime: RuntimeExec, DiskReserve: 1 << 62,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logged, mu: &mu}, nil))})
	require.True(t, e.diskFullNow())
	require.True(t, e.diskFullNow())
	e.cfg.DiskReserve = 0
	require.False(t, e.diskFullNow())
	mu.Lock()
	out := logged.String()
	mu.Unlock()
	require.Equal(t, 1, strings.Count(out, "data directory's disk full: less than --disk-reserve free"), out)
	require.Equal(t, 1, strings.Count(out, "data directory's disk no longer full"), out)
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
