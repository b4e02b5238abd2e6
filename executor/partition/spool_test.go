package partition

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

type feed struct {
	spool *Spool
	fifo  string
	res   chan FeedResult
}

func startFeed(t *testing.T, ctx context.Context, dir, name string, nudge *Nudge) *feed {
	t.Helper()
	sp, err := CreateSpool(filepath.Join(dir, name+".spool"))
	require.NoError(t, err)
	t.Cleanup(func() { sp.Close() })
	fifo := filepath.Join(dir, name)
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	f := &feed{spool: sp, fifo: fifo, res: make(chan FeedResult, 1)}
	go func() { f.res <- sp.Feed(ctx, fifo, nudge) }()
	return f
}

// TestPipesReadOneAfterAnother: two inputs of 4 MiB each (far more than a
// pipe holds) arrive at once; the task reads the second to its end, then
// the first. Nothing waits on the reader but the spool.
func TestPipesReadOneAfterAnother(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nudge := NewNudge()
	a := startFeed(t, ctx, dir, "0", nudge)
	b := startFeed(t, ctx, dir, "1", nudge)
	dataA, dataB := random(t, 4<<20), random(t, 4<<20)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for _, x := range []struct {
			s    *Spool
			data []byte
		}{{a.spool, dataA}, {b.spool, dataB}} {
			for off := 0; off < len(x.data); off += 10_000 {
				_, err := x.s.Write(x.data[off:min(off+10_000, len(x.data))])
				if err != nil {
					panic(err)
				}
			}
		}
		b.spool.End(nil)
		a.spool.End(nil)
	}()
	read := func(fifo string) []byte {
		f, err := os.Open(fifo)
		require.NoError(t, err)
		defer f.Close()
		b, err := io.ReadAll(f)
		require.NoError(t, err)
		return b
	}
	require.True(t, bytes.Equal(dataB, read(b.fifo)), "the second input, whole")
	require.True(t, bytes.Equal(dataA, read(a.fifo)), "then the first, whole")
	<-written
	require.Equal(t, Fed, <-a.res)
	require.Equal(t, Fed, <-b.res)
}

func TestAnEmptyInputIsAnImmediateEndOfFile(t *testing.T) {
	dir := t.TempDir()
	f := startFeed(t, context.Background(), dir, "0", nil)
	f.spool.End(nil)
	r, err := os.Open(f.fifo)
	require.NoError(t, err)
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Empty(t, b)
	r.Close()
	require.Equal(t, Fed, <-f.res)
	// A second open fails at once instead of waiting for a writer.
	_, err = os.Open(f.fifo)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestAFailedFetchIsNeverAnEndOfFile: the reader gets the bytes that came,
// then waits; the pipe closes only when the consumer's context ends (its
// task is gone by then).
func TestAFailedFetchIsNeverAnEndOfFile(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	f := startFeed(t, ctx, dir, "0", nil)
	r, err := os.Open(f.fifo)
	require.NoError(t, err)
	defer r.Close()
	_, err = f.spool.Write([]byte("partial"))
	require.NoError(t, err)
	buf := make([]byte, 7)
	_, err = io.ReadFull(r, buf)
	require.NoError(t, err)
	require.Equal(t, "partial", string(buf))
	f.spool.End(errors.New("the producer's executor is gone"))
	select {
	case res := <-f.res:
		t.Fatalf("the feed ended (%v) before the consumer did", res)
	default:
	}
	cancel()
	require.Equal(t, Stopped, <-f.res)
	n, err := r.Read(buf)
	require.Zero(t, n)
	require.ErrorIs(t, err, io.EOF, "the pipe closes once the consumer has ended")
}

func TestAFeedWithoutAReaderStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := startFeed(t, ctx, t.TempDir(), "0", NewNudge())
	f.spool.End(nil)
	cancel()
	require.Equal(t, Stopped, <-f.res)
}

func TestAReaderThatLeavesEarly(t *testing.T) {
	f := startFeed(t, context.Background(), t.TempDir(), "0", nil)
	r, err := os.Open(f.fifo)
	require.NoError(t, err)
	_, err = f.spool.Write(random(t, 1<<20))
	require.NoError(t, err)
	buf := make([]byte, 10)
	_, err = io.ReadFull(r, buf)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, ReaderGone, <-f.res)
}

// A spool that cannot be read any more (an I/O error) ends its feed as
// Unreadable, saying why, without an end of file: its caller stops the
// task (a task left waiting on its pipe would wait for good).
func TestAnUnreadableSpoolEndsTheFeed(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := startFeed(t, ctx, dir, "0", nil)
	r, err := os.OpenFile(f.fifo, os.O_RDONLY, 0)
	require.NoError(t, err)
	defer r.Close()
	_, err = f.spool.Write([]byte("abc"))
	require.NoError(t, err)
	got := make([]byte, 3)
	_, err = io.ReadFull(r, got)
	require.NoError(t, err)
	// The file fails every read from now on, and more has arrived.
	require.NoError(t, f.spool.f.Close())
	f.spool.mu.Lock()
	f.spool.size += 10
	f.spool.signalLocked()
	f.spool.mu.Unlock()
	require.Equal(t, Unreadable, <-f.res)
	require.ErrorContains(t, f.spool.ReadErr(), "closed")
	cancel() // the caller stopped the task: the pipe closes
	_, err = r.Read(got)
	require.ErrorIs(t, err, io.EOF)
}
