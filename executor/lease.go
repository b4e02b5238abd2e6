package executor

import (
	"fmt"
	"time"

	"jobmaster/wire"
)

// leaseExpired is the lease decision: a lease renewed at last has expired at
// now if d or more has passed.
func leaseExpired(last, now time.Time, d time.Duration) bool {
	return now.Sub(last) >= d
}

// leaseMessage is the terminal message of the tasks a lease expiry stops:
// after silent, with the lease of the given length about to run out (or
// run out already: a check that came late, the executor held up). heldUp
// is how long the executor's own lease checks did not run before this
// one: past heldUpAfter, the executor itself was stopped or starved (a
// SIGSTOP, a paused VM), and the message says so rather than blame the
// masters alone.
func leaseMessage(silent, lease, heldUp time.Duration) string {
	if heldUp >= heldUpAfter(lease) {
		prefix := wire.LeaseExpiringPrefix // stopped before it runs out (exec's fence time)
		if silent >= lease {
			prefix = wire.LeaseExpiredPrefix
		}
		return fmt.Sprintf(prefix+"this executor was held up (stopped or starved) for %s, and no heartbeat from a leader reached it for %s (lease %s)", heldUp, silent, lease)
	}
	switch {
	case silent == lease:
		return fmt.Sprintf(wire.LeaseExpiredPrefix+"no heartbeat from a leader for %s", lease)
	case silent > lease:
		return fmt.Sprintf(wire.LeaseExpiredPrefix+"no heartbeat from a leader for %s (lease %s)", silent, lease)
	}
	return fmt.Sprintf(wire.LeaseExpiringPrefix+"no heartbeat from a leader for %s (lease %s)", silent, lease)
}

// leaseTick is how often the lease loop checks the lease.
func leaseTick(d time.Duration) time.Duration {
	return max(d/20, time.Millisecond)
}

// heldUpAfter: a gap this long between two of the lease loop's checks
// (five times their interval) means the executor did not run.
func heldUpAfter(d time.Duration) time.Duration { return d / 4 }

// lease is the self-fencing lease: renewed by every accepted leader request.
type lease struct {
	dur    time.Duration
	last   time.Time
	fenced bool // expiry already acted on since the last renewal
	// held: a leader has renewed it since this process started (until
	// then there is no lease to lose, only a wait for a leader).
	held bool
	// checked: when the lease loop last checked it (zero: not yet).
	checked time.Time
}

// heldUp is how long the lease loop has not checked the lease, at now.
func (l *lease) heldUp(now time.Time) time.Duration {
	if l.checked.IsZero() {
		return 0
	}
	return now.Sub(l.checked)
}

// check reports whether the lease has expired at now and this is the first
// check since the last renewal to see it, i.e. whether to stop every task.
func (l *lease) check(now time.Time) bool {
	if l.fenced || !leaseExpired(l.last, now, l.dur) {
		return false
	}
	l.fenced = true
	return true
}

// begin starts the lease's clock at now, as the executor starts: it runs
// out as if renewed then, but no leader has given it.
func (l *lease) begin(now time.Time) {
	l.last = now
	l.fenced = false
}

// renew restarts the lease at now, on a leader's word.
func (l *lease) renew(now time.Time) {
	l.last = now
	l.fenced = false
	l.held = true
}
