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
// never reads a torn value. If the filesystem is full it overwrites the
// file in place (inplace.go), in a form a torn read cannot pass for a
// deadline: "=N N", the deadline twice (parseLeaseFile).
func (e *Executor) writeLeaseFileLocked() {
	if e.cfg.Runtime != RuntimeExec {
		return
	}
	path := filepath.Join(e.cfg.DataDir, leaseFileName)
	deadline := strconv.FormatInt(int64(monotonic()+e.cfg.Lease), 10)
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, []byte(deadline), 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		if e.leaseInPlace {
			e.leaseInPlace = false
			e.log.Info("lease file written the usual way again")
		}
		e.storageOKLocked(fileLease)
		return
	}
	_ = os.Remove(tmp)
	if noSpace(err) {
		if ierr := overwrite(path, []byte("="+deadline+" "+deadline+"\n"), false); ierr == nil {
			if !e.leaseInPlace {
				e.leaseInPlace = true
				e.log.Warn("disk full: lease file overwritten in place", "err", err)
			}
			e.storageOKLocked(fileLease)
			return
		}
	}
	e.storageFailedLocked(fileLease, err)
	e.log.Error("cannot write the lease file: the shims will stop their tasks at the last deadline written", "err", err)
}

// readLeaseFile returns the deadline (monotonic) in a lease file.
func readLeaseFile(path string) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseLeaseFile(string(b))
}

// parseLeaseFile reads a lease file's contents: a deadline, or "=N N" with
// the same deadline twice (written in place: a read torn by a concurrent
// write has a part of each and is refused).
func parseLeaseFile(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "="); ok {
		a, b, ok := strings.Cut(rest, " ")
		if !ok || a != b {
			return 0, false
		}
		s = a
	}
	ns, err := strconv.ParseInt(s, 10, 64)
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
