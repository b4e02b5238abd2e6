// Package privatedir makes a node's data directory private: its owner's
// alone (mode 0700), since it holds what others must not read (a master's
// Raft log and snapshots carry every job spec with its env; an executor's,
// the tasks' working directories, logs and partitions).
package privatedir

import (
	"fmt"
	"io/fs"
	"os"
)

// Ensure creates dir (and its parents) with mode 0700 if it does not
// exist, and takes away the group's and others' permissions of one that
// does. It returns the mode the directory had when it had to change it
// (0 when it did not).
func Ensure(dir string) (was fs.FileMode, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return 0, err
	}
	if !st.IsDir() {
		return 0, fmt.Errorf("%s is not a directory", dir)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(dir, perm&0o700); err != nil {
			return 0, fmt.Errorf("make %s private: %w", dir, err)
		}
		return perm, nil
	}
	return 0, nil
}
