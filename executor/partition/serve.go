package partition

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"jobmaster/transport"
	"jobmaster/wire"
)

// Request is one fetch of the bytes that subtask Index of vertex Consumer
// reads from producer execution Producer, from Offset on (see
// wire.PathPartitionData). Follow streams a running producer's pipelined
// output as it grows, until the producer ends.
type Request struct {
	Producer string
	Consumer string
	Index    int
	Offset   int64
	Follow   bool
}

// A stream that follows a running producer looks for new bytes this often:
// at once after new bytes, then less and less often while there are none.
const (
	minPoll = 5 * time.Millisecond
	maxPoll = 250 * time.Millisecond
)

// chunk is the size of the buffers bytes travel through: no stream, fetch
// or spool holds more of a partition in memory.
const chunk = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, chunk); return &b }}

var errClosed = errors.New("the store is closed")

// Serve answers one fetch (the caller has checked the fetcher's fence):
//
//   - a partition held: 200 with its bytes from the offset and the trailer
//     EndComplete; 416 if the offset is past its end; 410 if its files
//     changed on disk since it was kept (errChanged: it is lost);
//   - a running producer, for a pipelined output: 200, the bytes written so
//     far and, with follow, those still to come; then EndComplete if it
//     FINISHED, EndFailed if it did not. Without follow the answer ends
//     without a trailer (incomplete). For a blocking output: 404;
//   - a producer that ended without finishing, lately: 200, EndFailed;
//   - a consumer and index the producer writes nothing for: 400;
//   - anything else: 404.
func (s *Store) Serve(w http.ResponseWriter, r *http.Request, q Request) {
	s.mu.Lock()
	h := s.held[q.Producer]
	lv := s.live[q.Producer]
	_, failed := s.failed[q.Producer]
	s.mu.Unlock()
	nothing := func() {
		transport.Compact.WriteError(w, http.StatusBadRequest, fmt.Sprintf("producer %s writes nothing for subtask %d of %q", q.Producer, q.Index, q.Consumer))
	}
	switch {
	case h != nil:
		if !Wanted(h.meta.Outputs, h.meta.Subtask, q.Consumer, q.Index) {
			nothing()
			return
		}
		s.serveHeld(w, r, h, q)
	case lv != nil:
		if !Wanted(lv.meta.Outputs, lv.meta.Subtask, q.Consumer, q.Index) {
			nothing()
			return
		}
		if o, _ := output(lv.meta.Outputs, q.Consumer); o.Mode != wire.ModePipelined {
			transport.Compact.WriteError(w, http.StatusNotFound, fmt.Sprintf("producer %s still runs: its blocking output for %q is held once it FINISHED", q.Producer, q.Consumer))
			return
		}
		s.serveLive(w, r, lv, q)
	case failed:
		start(w)
		finish(w, wire.EndFailed)
	default:
		transport.Compact.WriteError(w, http.StatusNotFound, fmt.Sprintf("partition %s is not held here (released, lost, or its producer has not started)", q.Producer))
	}
}

// start begins a 200 answer whose trailer will say how the stream ended.
func start(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Trailer", wire.HeaderEnd+", "+wire.HeaderEndWhy)
	w.WriteHeader(http.StatusOK)
}

// finish sets the trailer: the answer is whole (EndComplete) or the bytes
// are not an output (EndFailed).
func finish(w http.ResponseWriter, end string) { w.Header().Set(wire.HeaderEnd, end) }

// broken ends the answer to q EndFailed because the producer broke the
// stream, saying how (wire.EndShrank, wire.EndReplaced), and logs it.
func (s *Store) broken(w http.ResponseWriter, q Request, why string) {
	s.log.Warn("a producer changed a file it was streaming (a pipelined output must only grow): the stream is broken",
		"execution", q.Producer, "consumer", q.Consumer, "index", q.Index, "why", why)
	w.Header().Set(wire.HeaderEndWhy, why)
	finish(w, wire.EndFailed)
}

func (s *Store) serveHeld(w http.ResponseWriter, r *http.Request, h *held, q Request) {
	if why := h.meta.Broken[q.Consumer+"/"+strconv.Itoa(q.Index)]; why != "" {
		start(w)
		s.broken(w, q, why)
		return
	}
	f, size, err := openHeld(h, q.Consumer, q.Index)
	select {
	case <-h.gone.ch: // released as it was opened: not held, not lost
		if f != nil {
			f.Close()
		}
		transport.Compact.WriteError(w, http.StatusNotFound, fmt.Sprintf("partition %s is not held here (released, lost, or its producer has not started)", q.Producer))
		return
	default:
	}
	if errors.Is(err, errChanged) {
		s.log.Warn("a partition's files changed on disk since it was kept: not served", "execution", q.Producer, "consumer", q.Consumer, "index", q.Index, "err", err)
		transport.Compact.WriteError(w, http.StatusGone, fmt.Sprintf("partition %s: %v: it is lost", q.Producer, err))
		return
	}
	if err != nil {
		transport.Compact.WriteError(w, http.StatusInternalServerError, fmt.Sprintf("partition %s: %v", q.Producer, err))
		return
	}
	if f != nil {
		defer f.Close()
	}
	if q.Offset > size {
		transport.Compact.WriteError(w, http.StatusRequestedRangeNotSatisfiable, fmt.Sprintf("offset %d is past the end of the data (%d bytes)", q.Offset, size))
		return
	}
	start(w)
	if r.Method == http.MethodHead {
		return
	}
	if f != nil {
		defer cutWhenGone(w, h.gone, s.closed)()
		if n, err := s.pump(w, f, q.Offset, size, h.gone.ch, nil); err != nil || n != size-q.Offset {
			return // incomplete
		}
	}
	finish(w, wire.EndComplete)
}

// cutWhenGone makes the answer w end once gone is signalled, or the store
// closed: a partition released (or a producer discarded) while a slow or
// stalled reader streams it ends the stream, incomplete, so its file is
// closed and its space freed; a closed store (the executor stopping) ends
// every stream, so that its HTTP server can stop. A write the reader holds
// up is cut at once. The returned function stops the watch, and returns
// only once it has stopped, so no deadline is set on the connection after
// the handler is done.
func cutWhenGone(w http.ResponseWriter, gone *dropSignal, closed <-chan struct{}) func() {
	rc := http.NewResponseController(w)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-gone.ch:
		case <-closed:
		case <-stop:
			return
		}
		select {
		case <-stop: // the handler is done: its connection is not ours
		default:
			_ = rc.SetWriteDeadline(time.Now())
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// errChanged: a partition's files are not as they were kept (deleted,
// truncated or written to behind the executor's back); its bytes are not
// the producer's output, and the partition is lost.
var errChanged = errors.New("its files changed on disk since it was kept")

// openHeld opens the file of consumer's subtask index in partition h; nil
// (and size 0) when the producer did not write it. The file must have the
// size it had when the partition was kept (errChanged otherwise), and the
// partition's data directory must be there.
func openHeld(h *held, consumer string, index int) (*os.File, int64, error) {
	if h.dir == "" {
		return nil, 0, nil
	}
	name := consumer + "/" + strconv.Itoa(index)
	want := h.sizes[name]
	if fi, err := os.Stat(filepath.Join(h.dir, dataDir)); err != nil || !fi.IsDir() {
		return nil, 0, fmt.Errorf("%w (its data directory is gone)", errChanged)
	}
	f, err := os.OpenFile(filepath.Join(h.dir, dataDir, consumer, strconv.Itoa(index)), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if want != 0 {
			return nil, 0, fmt.Errorf("%w (%s: %d bytes kept, the file is gone)", errChanged, name, want)
		}
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("data of %s/%d is not a regular file", consumer, index)
	}
	if fi.Size() != want {
		f.Close()
		return nil, 0, fmt.Errorf("%w (%s: %d bytes kept, %d there now)", errChanged, name, want, fi.Size())
	}
	return f, fi.Size(), nil
}

func (s *Store) serveLive(w http.ResponseWriter, r *http.Request, lv *live, q Request) {
	start(w)
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	// The answer begins now, not with the producer's first byte, which may
	// be minutes away: the consumer's fetch bounds only the wait for it to
	// begin (Fetcher.HeaderTimeout).
	if rc.Flush() != nil {
		return
	}
	defer cutWhenGone(w, lv.gone, s.closed)()
	name := strconv.Itoa(q.Index)
	key := q.Consumer + "/" + name
	off := q.Offset
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	// A file found changed is broken for every later answer too.
	broke := func(why string) {
		s.markBroken(lv, key, why)
		s.broken(w, q, why)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	wait := minPoll
wait:
	for {
		select {
		case <-lv.failed: // discarded: the rest is not an output
			finish(w, wire.EndFailed)
			return
		default:
		}
		if f == nil && lv.out != "" {
			if f = openLive(lv.out, q.Consumer, name); f != nil {
				if why := s.checkStreamed(lv, key, f); why != "" {
					broke(why)
					return
				}
			}
		}
		if f != nil {
			fi, err := f.Stat()
			if err != nil {
				return
			}
			if fi.Size() < off {
				if s.cutShort(lv, key, fi) {
					broke(wire.EndShrank)
				} else {
					// Past anything sent of the file: this fetch alone
					// is answered so, and nothing is recorded.
					s.broken(w, q, wire.EndShrank)
				}
				return
			}
			if fi.Size() > off {
				if why := s.beginStreamed(lv, key, fi); why != "" {
					broke(why)
					return
				}
				// What is sent next follows what streams sent: the file
				// was not cut and written again, longer, since.
				if off > 0 {
					if why := s.checkStreamed(lv, key, f); why != "" {
						broke(why)
						return
					}
				}
				n, err := s.pump(w, f, off, fi.Size(), lv.gone.ch, lv.failed)
				off += n
				s.noteServed(lv, key, f, fi, off)
				if errors.Is(err, errFailed) {
					continue // ends failed, at the top
				}
				if err != nil || rc.Flush() != nil {
					return
				}
				wait = minPoll
				continue
			}
		}
		if !q.Follow {
			return // incomplete: no trailer
		}
		timer.Reset(wait)
		select {
		case <-lv.ended:
			break wait
		case <-timer.C:
			wait = min(2*wait, maxPoll)
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	}
	if !lv.complete {
		finish(w, wire.EndFailed)
		return
	}
	// It FINISHED: the rest is in the partition, which is the same file.
	s.mu.Lock()
	h := s.held[q.Producer]
	s.mu.Unlock()
	if h == nil {
		return // released meanwhile: incomplete, and the next fetch gets a 404
	}
	if why := h.meta.Broken[key]; why != "" {
		s.broken(w, q, why)
		return
	}
	g, size, err := openHeld(h, q.Consumer, q.Index)
	if err != nil {
		return
	}
	if g != nil {
		defer g.Close()
	}
	if f != nil && (g == nil || !sameFile(f, g)) {
		s.broken(w, q, wire.EndReplaced)
		return
	}
	if off > size {
		s.broken(w, q, wire.EndShrank)
		return
	}
	if g != nil {
		if n, err := s.pump(w, g, off, size, lv.gone.ch, nil); err != nil || n != size-off {
			return // incomplete
		}
	}
	finish(w, wire.EndComplete)
}

// openLive opens the file name in the directory of consumer in a running
// producer's output directory out, following no symbolic link and opening
// nothing but a regular file; nil if there is none (yet).
func openLive(out, consumer, name string) *os.File {
	const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	dfd, err := unix.Open(out, dirFlags, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(dfd)
	cfd, err := unix.Openat(dfd, consumer, dirFlags, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(cfd)
	var st unix.Stat_t
	if unix.Fstatat(cfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	fd, err := unix.Openat(cfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), filepath.Join(out, consumer, name))
}

func sameFile(f, g *os.File) bool {
	a, err1 := f.Stat()
	b, err2 := g.Stat()
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// errDropped: the partition streamed is no longer held. errFailed: its
// producer ended without one.
var (
	errDropped = errors.New("the partition was released")
	errFailed  = errors.New("the producer ended without finishing")
)

// pump copies f's bytes [off, end) to w, a chunk at a time, until gone
// or failed is closed (nil: never). A file that ends early stops the copy
// without an error (the caller looks again).
func (s *Store) pump(w io.Writer, f io.ReaderAt, off, end int64, gone, failed <-chan struct{}) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var n int64
	for off+n < end {
		select {
		case <-s.closed:
			return n, errClosed
		case <-gone:
			return n, errDropped
		case <-failed:
			return n, errFailed
		default:
		}
		m, err := f.ReadAt(buf[:min(int64(len(buf)), end-off-n)], off+n)
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
