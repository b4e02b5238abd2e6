package executor

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Reading a task log across its rotations (logrotate.go): its files,
// oldest first, read as one stream; and, to follow it, a cursor that goes
// on from a file to the next newer one when the writer rotates.

// logPart is one file of a log, open, with its size when it was opened.
type logPart struct {
	f    *os.File
	size int64
}

// logParts is a log's files, oldest first; the last is the current file.
type logParts struct {
	path  string
	files int
	parts []logPart
}

// openLog opens the files of the log at path that keeps files files:
// fs.ErrNotExist if its current file is missing. No file is opened through
// a symbolic link, and each must be a regular file.
func openLog(path string, files int) (*logParts, error) {
	lp := &logParts{path: path, files: files}
	for n := files - 1; n >= 0; n-- {
		f, err := openLogFile(rotatedName(path, n))
		if errors.Is(err, fs.ErrNotExist) && n > 0 {
			continue
		}
		if err != nil {
			lp.close()
			return nil, err
		}
		fi, _ := f.Stat()
		lp.parts = append(lp.parts, logPart{f: f, size: fi.Size()})
	}
	return lp, nil
}

// openLogFile opens one file of a log for reading.
func openLogFile(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, errors.New("not a regular file")
	}
	return f, nil
}

// size is the log's size over every file, as opened.
func (lp *logParts) size() int64 {
	var n int64
	for _, p := range lp.parts {
		n += p.size
	}
	return n
}

// reader reads the log as opened from offset off (over every file).
func (lp *logParts) reader(off int64) io.Reader {
	var rs []io.Reader
	for _, p := range lp.parts {
		if off >= p.size {
			off -= p.size
			continue
		}
		rs = append(rs, io.NewSectionReader(p.f, off, p.size-off))
		off = 0
	}
	return io.MultiReader(rs...)
}

// cursor hands the current file, positioned after what reader read, to a
// follower; the other files are closed with close.
func (lp *logParts) cursor() *logCursor {
	last := len(lp.parts) - 1
	c := &logCursor{path: lp.path, files: lp.files, f: lp.parts[last].f, off: lp.parts[last].size}
	lp.parts = lp.parts[:last]
	return c
}

func (lp *logParts) close() {
	for _, p := range lp.parts {
		p.f.Close()
	}
	lp.parts = nil
}

// logCursor follows a log: a file of it and the offset read so far.
type logCursor struct {
	path  string
	files int
	f     *os.File
	off   int64
}

// copyTo writes what the log holds beyond the cursor to w and moves the
// cursor to the end: to the end of its file, and, if the writer has
// rotated that file away, on through the newer files up to the current
// one. A file rotated away and deleted before it was reached is skipped.
func (c *logCursor) copyTo(w io.Writer, buf []byte) error {
	for {
		if err := c.drain(w, buf); err != nil {
			return err
		}
		next, ok := c.next()
		if !ok {
			return nil
		}
		// The writer is done with c.f (it rotated): what is left of it is
		// final. Read it, then go on to the next file.
		if err := c.drain(w, buf); err != nil {
			return err
		}
		c.f.Close()
		c.f, c.off = next, 0
	}
}

// drain copies c.f from the cursor to its end.
func (c *logCursor) drain(w io.Writer, buf []byte) error {
	for {
		n, err := c.f.ReadAt(buf, c.off)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			c.off += int64(n)
		}
		if err != nil || n == 0 {
			return nil
		}
	}
}

// next opens the file that follows c.f in the log if the writer has
// rotated c.f away: the one rotated just after it, or the current file.
// ok is false while c.f is still the current file (or nothing newer can
// be opened).
func (c *logCursor) next() (*os.File, bool) {
	mine, err := c.f.Stat()
	if err != nil {
		return nil, false
	}
	if fi, err := os.Lstat(c.path); err != nil || os.SameFile(fi, mine) {
		return nil, false
	}
	// c.f is now rotated file k (or gone): the next is k-1.
	k := c.files // gone: start from the oldest left
	for n := 1; n < c.files; n++ {
		if fi, err := os.Lstat(rotatedName(c.path, n)); err == nil && os.SameFile(fi, mine) {
			k = n
			break
		}
	}
	for n := k - 1; n >= 0; n-- {
		if f, err := openLogFile(rotatedName(c.path, n)); err == nil {
			return f, true
		}
	}
	return nil, false
}

func (c *logCursor) close() { c.f.Close() }
