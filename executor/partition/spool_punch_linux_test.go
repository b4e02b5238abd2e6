package partition

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// allocated is the disk space f's blocks take.
func allocated(t *testing.T, f *os.File) int64 {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Fstat(int(f.Fd()), &st))
	return st.Blocks * 512
}

// A task that keeps up with a pipelined stream leaves on disk only what it
// has not read: what the feeder put into the pipe is freed as it goes (a
// spool that kept it held the whole stream until the consumer ended).
func TestASpoolFreesWhatWasRead(t *testing.T) {
	dir := t.TempDir()
	probe, err := os.Create(filepath.Join(dir, "probe"))
	require.NoError(t, err)
	_, err = probe.Write(make([]byte, 8192))
	require.NoError(t, err)
	if err := unix.Fallocate(int(probe.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096); errors.Is(err, unix.EOPNOTSUPP) {
		t.Skip("this file system punches no holes")
	}
	probe.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := startFeed(t, ctx, dir, "0", nil)
	r, err := os.OpenFile(f.fifo, os.O_RDONLY, 0)
	require.NoError(t, err)
	defer r.Close()
	var read atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := r.Read(buf)
			read.Add(int64(n))
			if err == io.EOF || err != nil {
				return
			}
		}
	}()
	const total = 8 << 20
	data := random(t, total)
	for off := 0; off < total; off += 64 << 10 {
		_, err := f.spool.Write(data[off : off+64<<10])
		require.NoError(t, err)
	}
	// The stream goes on (the fetch has not ended): the task has read all
	// that came so far.
	for deadline := time.Now().Add(30 * time.Second); read.Load() < total; time.Sleep(5 * time.Millisecond) {
		require.False(t, time.Now().After(deadline), "the task read %d of %d bytes", read.Load(), total)
	}
	require.Less(t, allocated(t, f.spool.f), int64(2*punchEvery), "bytes the task has read stay on disk")
	f.spool.End(nil)
	<-done
	require.EqualValues(t, total, read.Load())
	require.Equal(t, Fed, <-f.res)
}
