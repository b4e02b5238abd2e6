package partition

import "time"

// The retry schedule of a fetch, as Flink's partition requests have it: the
// first retry 100 ms after a failure, each next one twice as late, at most
// 10 s apart.
const (
	InitialBackoff = 100 * time.Millisecond
	MaxBackoff     = 10 * time.Second
	// DefaultTimeout is how long a fetch goes on failing before the
	// consumer gives up on its source, unless configured otherwise.
	DefaultTimeout = 60 * time.Second
)

// Backoff is the wait before the next attempt after failures consecutive
// failed attempts (failures >= 1).
func Backoff(failures int) time.Duration {
	d := InitialBackoff
	for i := 1; i < failures && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// Retry is the decision after a failed attempt: the source has been
// failing since first (the first failure after the last attempt that made
// progress), this is failure number failures in a row, it is now now, and
// the source is given up once it has been failing for bound. It returns the
// wait before the next attempt, or giveUp. The last attempt is made at the
// bound, so a source that comes back just in time is still read.
func Retry(first, now time.Time, failures int, bound time.Duration) (wait time.Duration, giveUp bool) {
	failing := now.Sub(first)
	if failing >= bound {
		return 0, true
	}
	return min(Backoff(failures), bound-failing), false
}
