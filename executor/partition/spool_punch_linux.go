package partition

import (
	"os"

	"golang.org/x/sys/unix"
)

// punch frees the disk blocks of f's bytes [off, off+n) (a hole; the
// file's size stays), on file systems that can (ext4, xfs, tmpfs, btrfs);
// elsewhere it does nothing.
func punch(f *os.File, off, n int64) {
	_ = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}
