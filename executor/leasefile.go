package executor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The lease file tells the task shims when the lease runs out, so that a
// task dies on time even when its executor cannot act (stopped with
// SIGSTOP, or hung): each shim reads it as it polls and stops its task when
// the lease is about to run out. It holds the deadline on the machine's
// monotonic clock (CLOCK_MONOTONIC, in nanoseconds), which every process
// shares and which wall-clock adjustments do not move.
const leaseFileName = "lease"

// monotonic reads CLOCK_MONOTONIC.
func monotonic() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // cannot fail on Linux with a valid clock id
	}
	return time.Duration(ts.Nano())
}

// writeLeaseFileLocked records that the lease now runs until Lease from
// now. It writes a new file and renames it over the old one, so a shim
// never reads a torn value.
func (e *Executor) writeLeaseFileLocked() {
	if e.cfg.Runtime != RuntimeExec {
		return
	}
	path := filepath.Join(e.cfg.DataDir, leaseFileName)
	deadline := monotonic() + e.cfg.Lease
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(int64(deadline), 10)), 0o644); err == nil {
		err = os.Rename(tmp, path)
		if err != nil {
			e.log.Warn("lease file", "err", err)
		}
	}
}

// readLeaseFile returns the deadline (monotonic) in a lease file.
func readLeaseFile(path string) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ns), true
}

// shimMustStop is the shim's lease decision at monotonic time now: stop
// the task once less than the grace (plus half the time a kill may take) is
// left before the deadline, so that it is dead by then. The executor itself
// starts a little earlier (fenceAfter): the shim is the backstop for an
// executor that cannot act.
func shimMustStop(now, deadline, grace time.Duration) bool {
	return now >= deadline-grace-killMargin/2
}
