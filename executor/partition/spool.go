package partition

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// A pipelined input reaches its task through a named pipe, fed from a
// spool file: the fetch appends what arrives to the spool, at the pace of
// the producer, and a feeder copies the spool into the pipe, at the pace
// of the task. So a task may read its pipes in any order, one after
// another: what it does not read yet waits on disk, never in memory, and
// no producer waits for it. What the feeder has put into the pipe is freed
// from the disk as it goes (every punchEvery bytes, a hole punched in the
// spool), so a spool holds what is not read yet, not the whole stream.
//
// The pipe reaches end of file only when the fetch ended complete and the
// task has read every byte; a failed fetch leaves the pipe open (the task
// is stopped, and must not take the bytes for a whole output), until the
// consumer's context ends.

// punchEvery: the feeder frees what it has fed once this much more is fed.
const punchEvery = 1 << 20

// Spool is one pipelined input's spool file: one writer (the fetch), one
// reader (Feed).
type Spool struct {
	f *os.File

	mu      sync.Mutex
	size    int64
	ended   bool
	err     error         // the fetch's outcome, once ended
	changed chan struct{} // closed and replaced on every change
	readErr error         // what a read of the spool failed with (Unreadable)
	// gone: the task closed its pipe (ReaderGone); nothing reads the
	// spool again, and what is written to it is dropped.
	gone bool
}

// ReadErr is why the spool could not be read, once Feed returned
// Unreadable.
func (s *Spool) ReadErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readErr
}

// CreateSpool creates a new spool file at path (0600).
func CreateSpool(path string) (*Spool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &Spool{f: f, changed: make(chan struct{})}, nil
}

// Write appends p to the spool (drops it once the reader is gone).
func (s *Spool) Write(p []byte) (int, error) {
	s.mu.Lock()
	off, gone := s.size, s.gone
	s.mu.Unlock()
	if gone {
		return len(p), nil
	}
	n, err := s.f.WriteAt(p, off)
	if n > 0 {
		s.mu.Lock()
		s.size += int64(n)
		s.signalLocked()
		s.mu.Unlock()
	}
	return n, err
}

// End records the fetch's outcome: nil when the stream ended complete.
func (s *Spool) End(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	s.signalLocked()
	if s.gone {
		_ = s.f.Truncate(0) // what a write in flight as the reader went put there
	}
}

// Ended reports whether the fetch's outcome is recorded (End).
func (s *Spool) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// readerGone records that the task closed its pipe: the spool's bytes are
// freed, and what the fetch writes from now on is dropped (its caller
// should stop the fetch).
func (s *Spool) readerGone() {
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
	_ = s.f.Truncate(0)
}

func (s *Spool) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Close closes the spool file (the caller deletes it).
func (s *Spool) Close() error { return s.f.Close() }

// Nudge wakes the feeders of one consumer that wait for their task to open
// a pipe: when the task opens or finishes one pipe, it is likely to open
// another soon.
type Nudge struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewNudge returns a Nudge.
func NewNudge() *Nudge { return &Nudge{ch: make(chan struct{})} }

func (n *Nudge) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

// Wake wakes every feeder waiting on n.
func (n *Nudge) Wake() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}

// A feeder looks for its task's reader this often: at once when nudged,
// then less and less often.
const (
	minOpenPoll = 2 * time.Millisecond
	maxOpenPoll = time.Second
)

// FeedResult is how a feed ended.
type FeedResult int

const (
	// Fed: every byte went into the pipe, which was closed (end of file).
	Fed FeedResult = iota
	// ReaderGone: the task closed the pipe before the end. The spool's
	// bytes are freed and later writes dropped; the caller should stop
	// the fetch.
	ReaderGone
	// Stopped: ctx ended (the consumer ended), or the fetch failed and ctx
	// ended later; the task never saw end of file.
	Stopped
	// Unreadable: the spool could not be read (Spool.ReadErr says why);
	// the pipe is left open, the task never sees end of file, and its
	// caller must stop it.
	Unreadable
)

// Feed copies the spool into the named pipe fifo: it waits for the task to
// open the pipe (a writer that opened it first would block, or make an
// early end of file), removes its name (a pipe is read once), then copies the spool as it grows, and closes the
// pipe once the fetch ended complete and every byte is in. nudge (may be
// nil) is woken when the pipe is opened and when it is closed.
func (s *Spool) Feed(ctx context.Context, fifo string, nudge *Nudge) FeedResult {
	w, err := openWriter(ctx, fifo, nudge)
	if err != nil {
		return Stopped
	}
	// The pipe is read once: once the task has it open, its name goes, so
	// that a second open fails ("no such file") instead of waiting for a
	// writer that never comes.
	_ = os.Remove(fifo)
	if nudge != nil {
		nudge.Wake()
	}
	// Closing the pipe unblocks a write stuck on a task that reads no
	// more; ctx ends only once the task is gone. Whatever way the feed
	// ends short of a whole stream, the pipe closes then, and not before
	// (an early close would be an end of file). It is not called off on
	// return: a feed that returns as ctx ends would call it off before it
	// ran, and leave the task's pipe open for good.
	stop := context.AfterFunc(ctx, func() { w.Close() })
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var off, punched int64
	for {
		s.mu.Lock()
		size, ended, ferr, changed := s.size, s.ended, s.err, s.changed
		s.mu.Unlock()
		if off < size {
			n, err := s.f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					if errors.Is(werr, syscall.EPIPE) {
						stop()
						w.Close()
						s.readerGone()
						return ReaderGone
					}
					return Stopped
				}
				off += int64(n)
				if fed := off &^ 4095; fed-punched >= punchEvery {
					punch(s.f, punched, fed-punched)
					punched = fed
				}
			}
			if err != nil && !errors.Is(err, io.EOF) {
				// The spool is unreadable: never an end of file. The
				// pipe stays open (closing it would be one) until the
				// caller has stopped the task and ctx ends.
				s.mu.Lock()
				s.readErr = err
				s.mu.Unlock()
				return Unreadable
			}
			continue
		}
		if ended && ferr == nil {
			stop()
			w.Close()
			if nudge != nil {
				nudge.Wake()
			}
			return Fed
		}
		if ended {
			<-ctx.Done()
			return Stopped
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Stopped
		}
	}
}

// openWriter opens fifo for writing once a reader has it open.
func openWriter(ctx context.Context, fifo string, nudge *Nudge) (*os.File, error) {
	wait := minOpenPoll
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var woken <-chan struct{}
		if nudge != nil {
			woken = nudge.wait()
		}
		// Non-blocking: ENXIO while no reader has the pipe open. The file
		// is pollable, so later writes wait for the reader without
		// blocking a thread.
		w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			return w, nil
		}
		if !errors.Is(err, syscall.ENXIO) {
			return nil, err
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-woken:
			wait = minOpenPoll
		case <-timer.C:
			wait = min(2*wait, maxOpenPoll)
		}
	}
}
