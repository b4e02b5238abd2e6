package executor

import (
	"io/fs"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Task logs rotate by size. A log is its current file, <stream>.log, and
// the files rotated out of it: <stream>.log.1 (the newest) up to
// <stream>.log.<N-1> (the oldest), N files in all. When a write would take
// the current file past the size limit, the current file becomes .1, the
// others move up one, the oldest goes, and a new current file starts. The
// task's shim writes its logs (RunShim); the executor reads them across
// rotations (logs.go).

// rotatedName is the name of the n-th newest file rotated out of the log
// at path (n >= 1); n = 0 is the current file.
func rotatedName(path string, n int) string {
	if n == 0 {
		return path
	}
	return path + "." + strconv.Itoa(n)
}

// rotator is a log being written: an io.Writer that rotates.
type rotator struct {
	path  string
	max   int64 // the size at which it rotates (0: never)
	files int   // files kept, the current one included (at least 1)

	mu     sync.Mutex
	f      *os.File // nil once closed, or when a rotation failed
	size   int64
	closed bool
}

// openRotator opens the log at path for appending.
func openRotator(path string, maxSize int64, files int) (*rotator, error) {
	r := &rotator{path: path, max: maxSize, files: max(files, 1)}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rotator) open() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	r.f, r.size = f, fi.Size()
	return nil
}

// Write appends p, rotating first whenever the current file is full; a
// write larger than the limit is spread over several files. After a
// rotation failed (the disk full), each write tries to open the current
// file again.
func (r *rotator) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	written := 0
	for len(p) > 0 {
		if r.closed {
			return written, fs.ErrClosed
		}
		if r.f == nil {
			if err := r.open(); err != nil {
				return written, err
			}
		}
		chunk := p
		if r.max > 0 {
			if r.size >= r.max {
				if err := r.rotate(); err != nil {
					return written, err
				}
			}
			if room := r.max - r.size; int64(len(chunk)) > room {
				chunk = chunk[:room]
			}
		}
		n, err := r.f.Write(chunk)
		written += n
		r.size += int64(n)
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// rotate moves the current file to .1 (and every rotated file one up,
// dropping the oldest) and starts a new current file.
func (r *rotator) rotate() error {
	if err := r.f.Close(); err != nil {
		r.f = nil
		return err
	}
	r.f = nil
	_ = os.Remove(rotatedName(r.path, r.files-1))
	for n := r.files - 2; n >= 0; n-- {
		if err := os.Rename(rotatedName(r.path, n), rotatedName(r.path, n+1)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return r.open()
}

// Close closes the current file.
func (r *rotator) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
