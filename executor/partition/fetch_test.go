package partition

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/internal/pkitest"
	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// holder serves a store's partitions as an executor does, minus the
// validation and the fence check, and records every request.
type holder struct {
	s *Store
	// cut, when set, ends an answer abruptly after that many bytes, for the
	// first cuts answers.
	cut  int
	cuts int

	mu   sync.Mutex
	reqs []*http.Request
}

func (h *holder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.reqs = append(h.reqs, r)
	cut := h.cuts > 0
	if cut {
		h.cuts--
	}
	h.mu.Unlock()
	v := r.URL.Query()
	index, _ := strconv.Atoi(v.Get("index"))
	offset, _ := strconv.ParseInt(v.Get("offset"), 10, 64)
	q := Request{Producer: v.Get("id"), Consumer: v.Get("consumer"), Index: index, Offset: offset, Follow: v.Get("follow") == "1"}
	if cut {
		w = &cutter{ResponseWriter: w, left: h.cut}
	}
	h.s.Serve(w, r, q)
}

func (h *holder) offsets() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.reqs {
		out = append(out, r.URL.Query().Get("offset"))
	}
	return out
}

// cutter lets left bytes through, then breaks the connection off.
type cutter struct {
	http.ResponseWriter
	left int
}

func (c *cutter) Write(p []byte) (int, error) {
	if len(p) < c.left {
		c.left -= len(p)
		return c.ResponseWriter.Write(p)
	}
	n, _ := c.ResponseWriter.Write(p[:c.left])
	c.left = 0
	http.NewResponseController(c.ResponseWriter).Flush()
	_ = n
	panic(http.ErrAbortHandler)
}

func (c *cutter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func startHolder(t *testing.T, h *holder) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// dataURL is a fetch of src from offset off at the holder at addr.
func dataURL(addr string, src Source, off int64) string {
	return "http://" + addr + wire.PathPartitionData + "?" + Query(src, off).Encode()
}

// getData asks the holder at addr for src from off. The answer is bounded:
// one that goes on streaming (bytes of another file, then waiting for
// more) fails the test after 20 s.
func getData(t *testing.T, addr string, src Source, off int64) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, dataURL(addr, src, off), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readAnswer reads an answer to its end: its bytes, its end marker and
// why it broke.
func readAnswer(t *testing.T, resp *http.Response) (string, string, string) {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b), resp.Trailer.Get(wire.HeaderEnd), resp.Trailer.Get(wire.HeaderEndWhy)
}

// readMiB reads the first MiB of an answer, after which its reader stalls.
func readMiB(t *testing.T, resp *http.Response) {
	t.Helper()
	_, err := io.ReadFull(resp.Body, make([]byte, 1<<20))
	require.NoError(t, err)
}

// requireCut reads the rest of an answer whose first MiB was read: it was
// cut (an error) or ended without its marker, as the write was held up or
// not when the cut came, and did not carry the whole of total bytes.
func requireCut(t *testing.T, resp *http.Response, total int, what string) {
	t.Helper()
	n, _ := io.Copy(io.Discard, resp.Body)
	require.Less(t, n+1<<20, int64(total), what)
	require.NotEqual(t, wire.EndComplete, resp.Trailer.Get(wire.HeaderEnd))
}

func fetcher(t *testing.T, bound time.Duration) *Fetcher {
	c := transport.NewClient(transport.ClientOptions{})
	t.Cleanup(c.CloseIdleConnections)
	return &Fetcher{Client: c, Fence: func() (string, uint64) { return "c1", 7 }, Bound: bound}
}

// committed makes a partition of meta(attempt) whose count/0 holds data.
func committed(t *testing.T, s *Store, attempt int, data []byte) Meta {
	t.Helper()
	out := filepath.Join(t.TempDir(), "output")
	require.NoError(t, os.MkdirAll(filepath.Join(out, "count"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(out, "count", "0"), data, 0o600))
	m := meta(attempt)
	s.Begin(m, out)
	_, err := s.Commit(m.ID)
	require.NoError(t, err)
	return m
}

func random(t *testing.T, n int) []byte {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func TestFetchAPartition(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	data := random(t, 300_000)
	m := committed(t, s, 0, data)
	h := &holder{s: s}
	addr := startHolder(t, h)
	f := fetcher(t, time.Minute)

	var got bytes.Buffer
	require.NoError(t, f.Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count", Index: 0}, &got))
	require.Equal(t, data, got.Bytes())
	r := h.reqs[0]
	require.Equal(t, "c1", r.Header.Get(wire.HeaderCluster), "the fetcher's fence travels with it")
	require.Equal(t, "7", r.Header.Get(wire.HeaderToken))

	// A file the producer did not write is empty data.
	got.Reset()
	require.NoError(t, f.Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count", Index: 2}, &got))
	require.Zero(t, got.Len())
}

// TestAFetchCutMidwayLosesAndDuplicatesNothing: the holder breaks the
// connection off three times in the middle of the data; every retry goes
// on from the offset reached.
func TestAFetchCutMidwayLosesAndDuplicatesNothing(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	data := random(t, 1_000_000)
	m := committed(t, s, 0, data)
	h := &holder{s: s, cut: 123_457, cuts: 3}
	addr := startHolder(t, h)

	var got bytes.Buffer
	require.NoError(t, fetcher(t, time.Minute).Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count"}, &got))
	require.Equal(t, len(data), got.Len())
	require.True(t, bytes.Equal(data, got.Bytes()), "the same bytes, in order")
	require.Equal(t, []string{"0", "123457", "246914", "370371"}, h.offsets())
}

// sink is a buffer that says when it holds at least n bytes.
type sink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func pipelined() []wire.Output {
	return []wire.Output{{Vertex: "count", Parallelism: 2, Mode: wire.ModePipelined}}
}

// runningProducer is a store serving a running producer whose pipelined
// output for "count" is written in out, and its address.
func runningProducer(t *testing.T) (*Store, string, Meta, string) {
	return runningProducerIn(t, t.TempDir())
}

// runningProducerIn is runningProducer with the store in dir.
func runningProducerIn(t *testing.T, dir string) (*Store, string, Meta, string) {
	s, err := Open(dir, quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	out := filepath.Join(t.TempDir(), "output")
	require.NoError(t, os.MkdirAll(filepath.Join(out, "count"), 0o700))
	m := meta(0)
	m.Outputs = pipelined()
	s.Begin(m, out)
	return s, out, m, startHolder(t, &holder{s: s})
}

func TestFollowARunningProducer(t *testing.T) {
	s, out, m, addr := runningProducer(t)
	f := fetcher(t, time.Minute)

	got := &sink{}
	done := make(chan error, 1)
	go func() {
		done <- f.Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count", Index: 1, Follow: true}, got)
	}()
	// The file does not exist yet; then it grows while the fetch runs.
	file := filepath.Join(out, "count", "1")
	w, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	_, err = w.WriteString("first ")
	require.NoError(t, err)
	waitFor(t, "the first bytes to stream before the producer ends", func() bool { return got.String() == "first " })
	_, err = w.WriteString("second")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	n, err := s.Commit(m.ID)
	require.NoError(t, err)
	require.EqualValues(t, 12, n)
	require.NoError(t, <-done)
	require.Equal(t, "first second", got.String())

	// Without follow, a running producer's answer is incomplete: only a
	// pipelined output of a live producer is served, and blocking is 404.
	m2 := meta(1)
	m2.Outputs = []wire.Output{{Vertex: "count", Parallelism: 1, Mode: wire.ModeBlocking}}
	s.Begin(m2, t.TempDir())
	resp, err := http.Get(dataURL(addr, Source{Producer: m2.ID, Consumer: "count"}, 0))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// A producer that replaces a file it is streaming breaks the stream: the
// consumer is told so, not that the producer did not finish (it did).
func TestAProducerThatReplacesAStreamedFileIsNamed(t *testing.T) {
	s, out, m, addr := runningProducer(t)
	f := fetcher(t, time.Minute)
	got := &sink{}
	done := make(chan error, 1)
	go func() {
		done <- f.Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count", Index: 0, Follow: true}, got)
	}()
	file := filepath.Join(out, "count", "0")
	require.NoError(t, os.WriteFile(file, []byte("header\n"), 0o600))
	waitFor(t, "the header to stream", func() bool { return got.String() == "header\n" })
	require.NoError(t, os.WriteFile(file+".tmp", []byte("header\nrows\n"), 0o600))
	require.NoError(t, os.Rename(file+".tmp", file))
	_, err := s.Commit(m.ID)
	require.NoError(t, err)
	err = <-done
	require.ErrorIs(t, err, ErrProducerFailed)
	require.EqualError(t, err, "its producer replaced a file it was streaming: a pipelined output must only be appended to, never replaced or renamed over")
}

func TestAStreamOfAFailedProducerEndsFailed(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	out := filepath.Join(t.TempDir(), "output")
	require.NoError(t, os.MkdirAll(filepath.Join(out, "count"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(out, "count", "0"), []byte("half"), 0o600))
	m := meta(0)
	m.Outputs = pipelined()
	s.Begin(m, out)
	addr := startHolder(t, &holder{s: s})
	f := fetcher(t, time.Minute)
	got := &sink{}
	done := make(chan error, 1)
	go func() {
		done <- f.Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count", Index: 0, Follow: true}, got)
	}()
	waitFor(t, "the bytes so far", func() bool { return got.String() == "half" })
	s.Discard(m.ID)
	require.ErrorIs(t, <-done, ErrProducerFailed)
	// A fetch that comes later learns it at once too.
	require.ErrorIs(t, f.Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count", Follow: true}, &sink{}), ErrProducerFailed)
}

func TestAFetchGivesUpAfterItsBound(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	h := &holder{s: s}
	addr := startHolder(t, h)
	err = fetcher(t, 300*time.Millisecond).Fetch(context.Background(), Source{Addr: addr, Producer: "j/gen/0/0", Consumer: "count"}, &sink{})
	var un *UnavailableError
	require.ErrorAs(t, err, &un)
	require.Contains(t, err.Error(), "404 Not Found: partition j/gen/0/0 is not held here")
	require.Greater(t, len(h.offsets()), 1, "it retried")
}

func TestAFetchThatNoRetryCanHelpFailsAtOnce(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	m := committed(t, s, 0, []byte("abc"))
	h := &holder{s: s}
	addr := startHolder(t, h)
	f := fetcher(t, time.Hour)
	var un *UnavailableError
	err = f.Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count", Index: 3}, &sink{})
	require.ErrorAs(t, err, &un)
	require.Contains(t, err.Error(), "400 Bad Request: producer j/gen/1/0 writes nothing for subtask 3")
	require.Len(t, h.offsets(), 1)

	resp, err := http.Get(dataURL(addr, Source{Producer: m.ID, Consumer: "count"}, 4))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode)
}

// A partition whose files changed behind the executor's back (deleted,
// cut, written to, its directory gone) is not served as its producer's
// output: the fetch fails at once as unavailable (410), so the partition
// counts as lost and its producer runs again; an empty file the producer
// left is still served, and after a restart of the store what is on disk
// then is what it checks against.
func TestAPartitionChangedOnDiskIsNotServed(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	m := committed(t, s, 0, []byte("0123456789"))
	addr := startHolder(t, &holder{s: s})
	f := fetcher(t, time.Hour)
	file := filepath.Join(dir, filepath.FromSlash(m.ID), "data", "count", "0")
	fetch := func(index int) error {
		return f.Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count", Index: index}, &sink{})
	}
	var un *UnavailableError

	require.NoError(t, fetch(0))
	require.NoError(t, os.Truncate(file, 4))
	err = fetch(0)
	require.ErrorAs(t, err, &un)
	require.ErrorContains(t, err, "410 Gone: partition j/gen/1/0: its files changed on disk since it was kept (count/0: 10 bytes kept, 4 there now): it is lost")
	require.NoError(t, os.WriteFile(file, []byte("0123456789 and more"), 0o600))
	require.ErrorAs(t, fetch(0), &un, "grown")
	require.NoError(t, os.Remove(file))
	require.ErrorContains(t, fetch(0), "count/0: 10 bytes kept, the file is gone")
	require.NoError(t, fetch(2), "a file the producer did not write is empty data")
	require.NoError(t, os.WriteFile(file, []byte("0123456789"), 0o600))
	require.NoError(t, fetch(0), "as kept again")

	// A store opened again checks against the sizes it finds (and that its
	// metadata's total confirms).
	s.Close()
	s, err = Open(dir, quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	addr = startHolder(t, &holder{s: s})
	require.NoError(t, fetch(0))
	require.NoError(t, os.Truncate(file, 9))
	require.ErrorContains(t, fetch(0), "count/0: 10 bytes kept, 9 there now")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, filepath.FromSlash(m.ID), "data")))
	require.ErrorContains(t, fetch(2), "its data directory is gone", "even for a file the producer did not write")
}

// A partition released while a reader that stalled streams it ends that
// stream (its file closed, its space freed), however slow the reader: the
// rest of the answer never comes, and it has no end marker.
func TestReleaseEndsTheStreamsOfAPartition(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB: more than the sockets buffer
	m := committed(t, s, 0, data)
	addr := startHolder(t, &holder{s: s})
	resp := getData(t, addr, Source{Producer: m.ID, Consumer: "count"}, 0)
	readMiB(t, resp)
	require.Equal(t, []string{m.ID}, s.Release([]string{m.ID}))
	requireCut(t, resp, len(data), "the whole partition was sent after its release")
}

// Closing the store (the executor stopping) ends the streams it serves,
// even one whose reader stalled and holds a write up: otherwise the
// executor's HTTP server could not stop until its deadline.
func TestCloseEndsAStreamWhoseWriteIsHeldUp(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB: more than the sockets buffer
	m := committed(t, s, 0, data)
	w := &writeWatch{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.ResponseWriter = rw
		(&holder{s: s}).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	resp := getData(t, strings.TrimPrefix(srv.URL, "http://"), Source{Producer: m.ID, Consumer: "count"}, 0)
	readMiB(t, resp) // then stalls
	last := int64(-1)
	require.Eventually(t, func() bool { // one write, held up
		n, in := w.state()
		held := in && n == last
		last = n
		return held
	}, 20*time.Second, 50*time.Millisecond)
	s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, srv.Config.Shutdown(ctx), "the server could not stop: a stream outlived the store")
	requireCut(t, resp, len(data), "the whole partition was sent after the store closed")
}

// writeWatch is a ResponseWriter that tells whether a write is under way
// and how many writes began.
type writeWatch struct {
	http.ResponseWriter
	mu     sync.Mutex
	writes int64
	in     bool
}

func (w *writeWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	w.in = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.in = false
		w.mu.Unlock()
	}()
	return w.ResponseWriter.Write(b)
}

func (w *writeWatch) state() (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.in
}

func (w *writeWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// The same for a stream that followed the producer while it ran and goes
// on after it FINISHED: the release of its partition ends it too.
func TestReleaseEndsAFollowingStream(t *testing.T) {
	s, out, m, addr := runningProducer(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB
	require.NoError(t, os.WriteFile(filepath.Join(out, "count", "0"), data, 0o600))
	resp := getData(t, addr, Source{Producer: m.ID, Consumer: "count", Follow: true}, 0)
	readMiB(t, resp)
	_, err := s.Commit(m.ID)
	require.NoError(t, err)
	require.Equal(t, []string{m.ID}, s.Release([]string{m.ID}))
	requireCut(t, resp, len(data), "the whole output was sent after its release")
}

// A file cut short by its producer just before it FINISHED is named as
// cut short, not replaced; what a holder says of a broken stream is kept
// short and printable.
func TestABrokenStreamSaysHow(t *testing.T) {
	s, out, m, addr := runningProducer(t)
	f := fetcher(t, time.Minute)
	got := &sink{}
	done := make(chan error, 1)
	go func() {
		done <- f.Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count", Index: 0, Follow: true}, got)
	}()
	file := filepath.Join(out, "count", "0")
	require.NoError(t, os.WriteFile(file, []byte("0123456789"), 0o600))
	waitFor(t, "the bytes to stream", func() bool { return got.String() == "0123456789" })
	require.NoError(t, os.Truncate(file, 4))
	_, err := s.Commit(m.ID)
	require.NoError(t, err)
	require.EqualError(t, <-done, "its producer cut short a file it was streaming: a pipelined output must only be appended to")

	long := &BrokenStreamError{Why: cleanWhy("no\x1b[2Jsuch " + strings.Repeat("x", 1000))}
	require.Equal(t, "its producer broke the stream (no[2Jsuch xxxxxxxxxxxxxxxxxxxxxx)", long.Error())
}

// A stream that resumes in another answer (its connection broke) is held
// to the file the first answer streamed: replaced meanwhile, or cut and
// written again, it is a broken stream, not bytes of two files spliced;
// and once the producer FINISHED, every fetch of that file says so.
func TestAResumedStreamIsHeldToTheFileStreamed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, file string)
		why    string
	}{
		{"replaced", func(t *testing.T, file string) {
			require.NoError(t, os.WriteFile(file+".tmp", []byte("header\nrows\n"), 0o600))
			require.NoError(t, os.Rename(file+".tmp", file))
		}, wire.EndReplaced},
		{"cut and written again", func(t *testing.T, file string) {
			require.NoError(t, os.WriteFile(file, []byte("HEADER\nrows\n"), 0o600))
		}, wire.EndShrank},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, out, m, addr := runningProducer(t)
			file := filepath.Join(out, "count", "0")
			require.NoError(t, os.WriteFile(file, []byte("header\n"), 0o600))
			src := Source{Producer: m.ID, Consumer: "count", Follow: true}
			first := getData(t, addr, src, 0)
			got := make([]byte, 7)
			_, err := io.ReadFull(first.Body, got)
			require.NoError(t, err)
			require.Equal(t, "header\n", string(got))
			first.Body.Close() // the connection breaks

			tc.change(t, file)
			rest, end, why := readAnswer(t, getData(t, addr, src, 7))
			require.Empty(t, rest, "bytes of another file")
			require.Equal(t, wire.EndFailed+"/"+tc.why, end+"/"+why)

			_, err = s.Commit(m.ID)
			require.NoError(t, err)
			_, _, why = readAnswer(t, getData(t, addr, src, 7))
			require.Equal(t, tc.why, why, "the partition answers that file as broken")
		})
	}
	// A file only appended to resumes where it broke, while the producer
	// runs and after it FINISHED.
	s, out, m, addr := runningProducer(t)
	file := filepath.Join(out, "count", "0")
	require.NoError(t, os.WriteFile(file, []byte("header\n"), 0o600))
	src := Source{Producer: m.ID, Consumer: "count", Follow: true}
	first := getData(t, addr, src, 0)
	_, err := io.ReadFull(first.Body, make([]byte, 7))
	require.NoError(t, err)
	first.Body.Close()
	w, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = w.WriteString("rows\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	resumed := getData(t, addr, src, 7)
	got := make([]byte, 5)
	_, err = io.ReadFull(resumed.Body, got)
	require.NoError(t, err)
	require.Equal(t, "rows\n", string(got))
	_, err = s.Commit(m.ID)
	require.NoError(t, err)
	rest, end, _ := readAnswer(t, resumed)
	require.Equal(t, ""+wire.EndComplete, rest+end, "nothing more, and complete")
	rest, end, _ = readAnswer(t, getData(t, addr, src, 7))
	require.Equal(t, "rows\n"+wire.EndComplete, rest+end)
}

// A fetch asking for an offset past anything sent of a running producer's
// file is answered as past the end, and proves nothing about the file: the
// offset is the fetcher's word. A fetch of the same file from where it
// really is still streams it whole, and the partition is complete.
func TestAnOffsetPastWhatWasSentBreaksNothing(t *testing.T) {
	s, out, m, addr := runningProducer(t)
	file := filepath.Join(out, "count", "0")
	require.NoError(t, os.WriteFile(file, []byte("hi\n"), 0o600))
	src := Source{Producer: m.ID, Consumer: "count", Follow: true}
	rest, end, why := readAnswer(t, getData(t, addr, src, 1000))
	require.Equal(t, "/"+wire.EndFailed+"/"+wire.EndShrank, rest+"/"+end+"/"+why, "past the end, for this fetch")

	resp := getData(t, addr, src, 0)
	got := make([]byte, 3)
	_, err := io.ReadFull(resp.Body, got)
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(got))
	rest, end, why = readAnswer(t, getData(t, addr, src, 1000))
	require.Equal(t, wire.EndFailed+"/"+wire.EndShrank, end+"/"+why)
	_, err = s.Commit(m.ID)
	require.NoError(t, err)
	rest, end, _ = readAnswer(t, resp)
	require.Equal(t, wire.EndComplete, rest+end)
	rest, end, _ = readAnswer(t, getData(t, addr, src, 0))
	require.Equal(t, "hi\n"+wire.EndComplete, rest+end, "the partition is whole")
}

// What a file found broken is stays so across a restart of the executor;
// a file of which nothing was sent may be replaced (nothing to splice).
func TestABrokenFileStaysBrokenAndAnUnsentOneMayBeReplaced(t *testing.T) {
	dir := t.TempDir()
	s, out, m, addr := runningProducerIn(t, dir)
	get := func(addr string, index, off int) (string, string, string) {
		return readAnswer(t, getData(t, addr, Source{Producer: m.ID, Consumer: "count", Index: index, Follow: true}, int64(off)))
	}
	// count/0: 7 bytes sent, then replaced. count/1: opened empty, nothing
	// sent, then replaced.
	zero, one := filepath.Join(out, "count", "0"), filepath.Join(out, "count", "1")
	require.NoError(t, os.WriteFile(zero, []byte("header\n"), 0o600))
	require.NoError(t, os.WriteFile(one, nil, 0o600))
	for _, x := range []struct {
		index, want int
	}{{0, 7}, {1, 0}} {
		b, _, _ := readAnswer(t, getData(t, addr, Source{Producer: m.ID, Consumer: "count", Index: x.index}, 0))
		require.Len(t, b, x.want)
	}
	for _, f := range []string{zero, one} {
		require.NoError(t, os.WriteFile(f+".tmp", []byte("other\nrows\n"), 0o600))
		require.NoError(t, os.Rename(f+".tmp", f))
	}
	_, err := s.Commit(m.ID)
	require.NoError(t, err)
	body, end, _ := get(addr, 1, 0)
	require.Equal(t, "other\nrows\n", body)
	require.Equal(t, wire.EndComplete, end, "nothing was sent of it: the file it ended with is the one")
	_, end, why := get(addr, 0, 7)
	require.Equal(t, wire.EndFailed+"/"+wire.EndReplaced, end+"/"+why)

	s.Close()
	s2, err := Open(dir, quiet())
	require.NoError(t, err)
	t.Cleanup(s2.Close)
	addr2 := startHolder(t, &holder{s: s2})
	_, end, why = get(addr2, 0, 7)
	require.Equal(t, wire.EndFailed+"/"+wire.EndReplaced, end+"/"+why, "after a restart too")
	body, end, _ = get(addr2, 1, 0)
	require.Equal(t, "other\nrows\n"+wire.EndComplete, body+end)
}

// Streams of a file its producer only appends to, resuming again and
// again side by side, are never found broken.
func TestResumingStreamsOfAnAppendedFileAreNeverBroken(t *testing.T) {
	s, out, m, addr := runningProducer(t)
	file := filepath.Join(out, "count", "0")
	w, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	line := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var broken []string
	var resumes atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get(dataURL(addr, Source{Producer: m.ID, Consumer: "count", Follow: true}, int64(off)))
				if err != nil {
					continue
				}
				buf := make([]byte, 4096)
				n, _ := resp.Body.Read(buf) // some, then break the connection
				off += n
				resp.Body.Close()
				resumes.Add(1)
				if why := resp.Trailer.Get(wire.HeaderEndWhy); why != "" {
					mu.Lock()
					broken = append(broken, why)
					mu.Unlock()
				}
			}
		}()
	}
	// Until the streams have resumed often enough (or the file is 13 MB).
	for i := 0; i < 200_000 && resumes.Load() < 1000; i++ {
		_, err := w.Write(line)
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
	require.NoError(t, w.Close())
	_, err = s.Commit(m.ID)
	require.NoError(t, err)
	require.Empty(t, broken)
}

// A stream that resumes while the first one still sends (its reader
// stalled, or its connection broke unnoticed) is held to the file the
// first one sends from: replaced meanwhile, the resumed answer is broken.
func TestAResumeWhileTheFirstStreamSendsIsHeldToItsFile(t *testing.T) {
	_, out, m, addr := runningProducer(t)
	file := filepath.Join(out, "count", "0")
	require.NoError(t, os.WriteFile(file, bytes.Repeat([]byte("A"), 64<<20), 0o600))
	src := Source{Producer: m.ID, Consumer: "count", Follow: true}
	readMiB(t, getData(t, addr, src, 0)) // then stalls
	require.NoError(t, os.WriteFile(file+".tmp", bytes.Repeat([]byte("B"), 64<<20), 0o600))
	require.NoError(t, os.Rename(file+".tmp", file))
	rest, end, why := readAnswer(t, getData(t, addr, src, 1<<20))
	require.Empty(t, rest, "bytes of the other file")
	require.Equal(t, wire.EndFailed+"/"+wire.EndReplaced, end+"/"+why)
}

// A discarded producer's streams end failed in the answer that followed
// it (not in a later one), and one its reader holds up is cut.
func TestADiscardedProducersStreamsEnd(t *testing.T) {
	s, out, m, addr := runningProducer(t)
	require.NoError(t, os.WriteFile(filepath.Join(out, "count", "0"), []byte("half"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(out, "count", "1"), bytes.Repeat([]byte("x"), 64<<20), 0o600))
	src := func(index int) Source { return Source{Producer: m.ID, Consumer: "count", Index: index, Follow: true} }
	reading, stalled := getData(t, addr, src(0), 0), getData(t, addr, src(1), 0)
	_, err := io.ReadFull(reading.Body, make([]byte, 4))
	require.NoError(t, err)
	readMiB(t, stalled)
	s.Discard(m.ID)
	_, end, _ := readAnswer(t, reading)
	require.Equal(t, wire.EndFailed, end, "the answer that followed it says it failed")
	requireCut(t, stalled, 64<<20, "the whole failed output was sent")
}

// A partition whose metadata names a broken file that is not one of its
// files, or an unknown reason, is damaged: it is not kept.
func TestATamperedBrokenListIsDamage(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, quiet())
	require.NoError(t, err)
	m := committed(t, s, 0, []byte("abc"))
	s.Close()
	metaPath := filepath.Join(dir, filepath.FromSlash(m.ID), metaFile)
	for _, broken := range []map[string]string{
		{"count/0": strings.Repeat("x", 8000)},
		{"../count/0": wire.EndShrank},
		{"count/7": wire.EndShrank},
	} {
		b, err := os.ReadFile(metaPath)
		if err != nil {
			break // removed by the previous round: put it back
		}
		var mm Meta
		require.NoError(t, json.Unmarshal(b, &mm))
		mm.Broken = broken
		b, err = json.Marshal(mm)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(metaPath, b, 0o600))
		s2, err := Open(dir, quiet())
		require.NoError(t, err)
		require.Empty(t, s2.List(), "%v", broken)
		s2.Close()
		s3, err := Open(dir, quiet())
		require.NoError(t, err)
		m = committed(t, s3, 0, []byte("abc"))
		s3.Close()
	}
}

type fullDisk struct{}

func (fullDisk) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: "input", Err: syscall.ENOSPC}
}

func TestAFetchThatCannotStoreFailsAsLocal(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	m := committed(t, s, 0, []byte("abc"))
	addr := startHolder(t, &holder{s: s})
	err = fetcher(t, time.Hour).Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count"}, fullDisk{})
	var local *SinkError
	require.ErrorAs(t, err, &local)
	require.True(t, errors.Is(err, syscall.ENOSPC))
}

func TestAFetchEndsWithItsContext(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	m := meta(0)
	m.Outputs = pipelined()
	s.Begin(m, t.TempDir())
	addr := startHolder(t, &holder{s: s})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- fetcher(t, time.Hour).Fetch(ctx, Source{Addr: addr, Producer: m.ID, Consumer: "count", Follow: true}, &sink{})
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	s.Discard(m.ID)
}

// A pipelined consumer of a producer that writes nothing for longer than
// a fetch waits for an answer to begin keeps waiting: the answer begins at
// once, and the bytes follow when the producer writes them. (Its headers
// waited for the first byte: the fetch gave up after HeaderTimeout, again
// and again, and the consumer failed with "no answer within 10s".)
func TestFollowingASilentProducerWaits(t *testing.T) {
	s, out, m, addr := runningProducer(t)
	var err error
	f := fetcher(t, 200*time.Millisecond)
	f.HeaderTimeout = 50 * time.Millisecond

	got := &sink{}
	done := make(chan error, 1)
	go func() {
		done <- f.Fetch(context.Background(), Source{Addr: addr, Producer: m.ID, Consumer: "count", Index: 0, Follow: true}, got)
	}()
	// Silent for five times what a fetch bounds its failures to: the
	// fetch failed within that before.
	select {
	case err := <-done:
		t.Fatalf("the fetch of a silent running producer ended: %v", err)
	case <-time.After(time.Second):
	}
	require.NoError(t, os.WriteFile(filepath.Join(out, "count", "0"), []byte("late"), 0o600))
	_, err = s.Commit(m.ID)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Equal(t, "late", got.String())
}

// Two streams of one file that opened it on either side of a replacement:
// the first to begin sending fixes the file; the other is refused, and
// what it sent counts for nothing.
func TestTheFirstStreamToBeginFixesTheFile(t *testing.T) {
	s, out, m, _ := runningProducer(t)
	s.mu.Lock()
	lv := s.live[m.ID]
	s.mu.Unlock()
	key, file := "count/0", filepath.Join(out, "count", "0")
	require.NoError(t, os.WriteFile(file, []byte("first file\n"), 0o600))
	a, err := os.Open(file)
	require.NoError(t, err)
	defer a.Close()
	require.Empty(t, s.checkStreamed(lv, key, a))
	require.NoError(t, os.WriteFile(file+".tmp", []byte("second file\n"), 0o600))
	require.NoError(t, os.Rename(file+".tmp", file))
	b, err := os.Open(file)
	require.NoError(t, err)
	defer b.Close()
	require.Empty(t, s.checkStreamed(lv, key, b), "nothing sent yet: the newer file may be the one")

	ai, err := a.Stat()
	require.NoError(t, err)
	bi, err := b.Stat()
	require.NoError(t, err)
	require.Empty(t, s.beginStreamed(lv, key, ai), "a begins first: its file is the one")
	require.Equal(t, wire.EndReplaced, s.beginStreamed(lv, key, bi))
	s.noteServed(lv, key, b, bi, 12)
	s.noteServed(lv, key, a, ai, 5)
	s.mu.Lock()
	served := lv.files[key].served
	s.mu.Unlock()
	require.EqualValues(t, 5, served, "only the file begun counts")
	require.Equal(t, wire.EndReplaced, s.checkStreamed(lv, key, b), "a resume that opens the newer file")
}

// With TLS a fetch reads only from the certificate of the executor that
// holds the partition: another executor answering at its address (gossip
// gave it the holder's) feeds the task nothing. And a holder's address is
// host:port: one with a scheme, which would have the fetch go out in the
// clear, fails at once, sending nothing.
func TestAFetchReadsOnlyFromItsHolder(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	t.Cleanup(s.Close)
	data := random(t, 1000)
	m := committed(t, s, 0, data)
	ca := pkitest.New(t.TempDir())
	srv := transport.NewServer(&holder{s: s}, transport.ServerOptions{TLS: ca.Load(pki.Executor, "e2")})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = transport.Serve(srv, ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := transport.NewClient(transport.ClientOptions{TLS: ca.Load(pki.Executor, "e1"), PeerCheck: transport.ExecutorOnly})
	t.Cleanup(c.CloseIdleConnections)
	f := &Fetcher{Client: c, Fence: func() (string, uint64) { return "c1", 7 }, Bound: 300 * time.Millisecond}
	src := Source{Addr: ln.Addr().String(), Executor: "e2", Producer: m.ID, Consumer: "count", Index: 0}

	var got bytes.Buffer
	require.NoError(t, f.Fetch(context.Background(), src, &got))
	require.Equal(t, data, got.Bytes())

	got.Reset()
	other := src
	other.Executor = "e9"
	err = f.Fetch(context.Background(), other, &got)
	var un *UnavailableError
	require.ErrorAs(t, err, &un)
	require.ErrorContains(t, err, "comes from the certificate of executor e2, not of executor e9")
	require.Zero(t, got.Len(), "nothing read from another executor")

	plain := &holder{s: s}
	schemed := src
	schemed.Addr = "http://" + startHolder(t, plain)
	err = f.Fetch(context.Background(), schemed, &got)
	require.ErrorAs(t, err, &un)
	require.ErrorIs(t, err, transport.ErrPeerAddress)
	require.Empty(t, plain.offsets(), "nothing sent in the clear")
	require.Zero(t, got.Len())
}
