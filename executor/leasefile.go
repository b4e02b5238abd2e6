package executor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The lease file tells the task shims when the lease runs out, so that a
// task dies on time even when its executor cannot act (stopped with
// SIGSTOP, or hung): each shim reads it as it polls and stops its task when
// the lease is about to run out. It holds the wall-clock deadline in unix
// milliseconds.
const leaseFileName = "lease"

// writeLeaseFileLocked records that the lease now runs until Lease from
// now. It writes a new file and renames it over the old one, so a shim
// never reads a torn value.
func (e *Executor) writeLeaseFileLocked() {
	if e.cfg.Runtime != RuntimeExec {
		return
	}
	path := filepath.Join(e.cfg.DataDir, leaseFileName)
	deadline := time.Now().Add(e.cfg.Lease).UnixMilli()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(deadline, 10)), 0o644); err == nil {
		err = os.Rename(tmp, path)
		if err != nil {
			e.log.Warn("lease file", "err", err)
		}
	}
}

// readLeaseFile returns the deadline in a lease file.
func readLeaseFile(path string) (time.Time, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// shimMustStop is the shim's lease decision: stop the task once less than
// the grace (plus half the time a kill may take) is left before the
// deadline, so that it is dead by then. The executor itself starts a
// little earlier (fenceAfter): the shim is the backstop for an executor
// that cannot act.
func shimMustStop(now, deadline time.Time, grace time.Duration) bool {
	return !now.Before(deadline.Add(-grace - killMargin/2))
}
