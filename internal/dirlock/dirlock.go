// Package dirlock keeps two processes of one role from sharing a data
// directory: the first holds an exclusive lock on a file in it for as long
// as it runs (the kernel releases it when the process ends, however it
// ends), and a second is refused at start instead of sweeping the first
// one's files or writing over its fencing token and lease. A node of one
// role is refused a directory another role's node has used (CheckRole).
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// marks names, for each role, a file that is in its data directory from
// its first start on: another role's node refuses the directory.
var marks = []struct{ role, named, path string }{
	{"master", "a master", filepath.Join("raft", "raft.db")},
	{"executor", "an executor", "executor.lock"},
}

// CheckRole refuses dir when it holds another role's files: a master
// started in an executor's data directory, or an executor in a master's,
// would share no file with it, but each would sweep, chmod and back up
// what it takes for its own.
func CheckRole(dir, role string) error {
	for _, m := range marks {
		if m.role == role {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, m.path)); err == nil {
			return fmt.Errorf("data directory %s belongs to %s (%s is in it): each node needs a data directory of its own", dir, m.named, m.path)
		}
	}
	return nil
}

// Lock is a held lock on a data directory.
type Lock struct{ f *os.File }

// Acquire locks dir for role (the lock file is dir/<role>.lock), or says
// which process holds it.
func Acquire(dir, role string) (*Lock, error) {
	path := filepath.Join(dir, role+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid := strings.TrimSpace(string(b)); pid != "" {
				holder = " (pid " + pid + ")"
			}
		}
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another %s%s: each %s needs a data directory of its own", dir, role, holder, role)
		}
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &Lock{f: f}, nil
}

// Release gives the lock up; releasing nil or twice does nothing.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Close()
	l.f = nil
}
