package executor

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"jobmaster/internal/forceremove"
)

// diskFullBelow: a data directory's filesystem with less space than this
// left for the executor counts as full.
const diskFullBelow = 1 << 20

// diskFull is the decision behind the "disk full" note: err is a
// no-space error, or the data directory's filesystem has avail bytes left
// (avail < 0: unknown).
func diskFull(err error, avail int64) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	return avail >= 0 && avail < diskFullBelow
}

// availBytes is the space left to unprivileged users on dir's filesystem,
// -1 if unknown.
func availBytes(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// diskNote is the note added to a failure's message when the data
// directory's filesystem is full ("" if it is not): a task that dies of a
// full disk says so.
func (e *Executor) diskNote(err error) string {
	if e.cfg.Runtime != RuntimeExec {
		return ""
	}
	if !diskFull(err, availBytes(e.cfg.DataDir)) {
		return ""
	}
	return "disk full: no space left on the filesystem of " + e.cfg.DataDir
}

// withDiskNote is err's message, with the disk-full note if it applies.
func (e *Executor) withDiskNote(err error) string {
	if n := e.diskNote(err); n != "" {
		return err.Error() + " (" + n + ")"
	}
	return err.Error()
}

// localError is a failure of this executor's own storage while preparing
// a task.
func (e *Executor) localError(what string, err error) error {
	return errors.New(what + ": " + e.withDiskNote(err))
}

func mkfifo(path string) error { return unix.Mkfifo(path, 0o600) }

// sweepExecutions deletes the data-plane directories (output, input,
// spool) that an executor which died left in the execution directories
// under dataDir: no task of that life runs any more, and none of them is a
// partition (those live under partitions/). The logs stay.
func sweepExecutions(dataDir string, log *slog.Logger) {
	root := filepath.Join(dataDir, "executions")
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, ent := range ents {
			if !ent.IsDir() {
				continue
			}
			p := filepath.Join(dir, ent.Name())
			if depth < 5 {
				walk(p, depth+1)
				continue
			}
			switch ent.Name() {
			case outputDir, inputDir, spoolDir:
				log.Info("deleting data left by an earlier run", "dir", p)
				if err := forceremove.All(p); err != nil {
					log.Warn("deleting data left by an earlier run", "dir", p, "err", err)
				}
			}
		}
	}
	walk(root, 1)
}
