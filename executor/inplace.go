package executor

import (
	"errors"
	"os"
	"syscall"
)

// When the data directory's filesystem is full (a task filled it, say),
// the executor's own small files must still be written: the lease file,
// or every shim stops its task when the last deadline written passes, and
// the fencing token, or every request of a new leader is refused. Their
// usual writes make a new file and rename it over the old one, which
// needs free space. On a no-space error they fall back to overwriting the
// existing file in place, which needs none on filesystems that overwrite
// in place (ext4, xfs, tmpfs): the file's blocks are already allocated,
// and its contents stay within them.

// noSpace reports whether err is the filesystem's being full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// overwrite replaces the contents of the existing file path with data, in
// place (synced if sync). A process that dies meanwhile leaves the old or
// the new contents; a machine that loses power midway may leave a mix.
func overwrite(path string, data []byte, sync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
