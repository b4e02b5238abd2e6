package fsm

import (
	"fmt"
	"hash/fnv"
	"strconv"

	"jobmaster/jobspec"
)

// decideRestart applies a restart strategy to one failure event at time now
// (unix ms), updating the job's bookkeeping. It returns whether to restart,
// after how many milliseconds, and if not, why. seed is a deterministic
// pseudo-random value for exponential-delay's jitter.
func decideRestart(r *jobspec.Restart, st *RestartState, now int64, seed uint64) (ok bool, delayMs int64, why string) {
	switch r.Strategy {
	case jobspec.StrategyFixedDelay:
		st.Failures++
		st.LastFailure = now
		if st.Failures > r.Attempts {
			return false, 0, fmt.Sprintf("fixed-delay restart strategy allows %s", plural(r.Attempts, "restart"))
		}
		return true, r.Delay.Milliseconds(), ""
	case jobspec.StrategyFailureRate:
		st.LastFailure = now
		window := r.Interval.Milliseconds()
		kept := st.FailureTimes[:0]
		for _, t := range st.FailureTimes {
			if now-t < window {
				kept = append(kept, t)
			}
		}
		st.FailureTimes = append(kept, now)
		st.Failures = len(st.FailureTimes)
		if len(st.FailureTimes) > r.MaxFailures {
			return false, 0, fmt.Sprintf("failure-rate restart strategy allows %s per %s", plural(r.MaxFailures, "failure"), r.Interval.Std())
		}
		return true, r.Delay.Milliseconds(), ""
	case jobspec.StrategyExponentialDelay:
		if st.LastFailure != 0 && now-st.LastFailure >= r.ResetThreshold.Milliseconds() {
			st.Failures = 0
			st.BackoffMs = 0
		}
		st.LastFailure = now
		st.Failures++
		if r.Attempts > 0 && st.Failures > r.Attempts {
			return false, 0, fmt.Sprintf("exponential-delay restart strategy allows %s before a backoff reset", plural(r.Attempts, "restart"))
		}
		maxMs := r.MaxDelay.Milliseconds()
		if st.BackoffMs == 0 {
			st.BackoffMs = r.InitialDelay.Milliseconds()
		} else {
			st.BackoffMs = min(int64(float64(st.BackoffMs)*r.Multiplier), maxMs)
		}
		// Jitter in [-jitter, +jitter] of the backoff, from the seed. Explicit
		// conversions keep the arithmetic free of fused operations, so every
		// platform computes the same value.
		u := float64(seed>>11) / float64(1<<53)
		spread := float64(float64(st.BackoffMs) * r.Jitter)
		d := st.BackoffMs + int64(float64(spread*(float64(2*u)-1)))
		return true, max(0, min(d, maxMs)), ""
	}
	return false, 0, "restart strategy " + r.Strategy
}

// jitterSeed derives exponential-delay's pseudo-random jitter from the job
// and its failure count, so every master computes the same delay.
func jitterSeed(job string, failures int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(job))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(failures)))
	// FNV's high bits barely move when only the last byte changes; a
	// splitmix64 finalizer spreads every input bit over the result.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// plural is "1 restart", "2 restarts".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// decide is decideRestart for job j, asked once per job in an event: while
// a command that is one failure event for every job it touches applies
// (an executor lost: its partitions and its tasks go together), a job's
// later failures in it reuse its first answer, uncounted.
func (s *State) decide(j *Job, now int64) (ok bool, delayMs int64, why string) {
	if d, seen := s.event[j.ID]; seen {
		return d.ok, d.delay, d.why
	}
	ok, delayMs, why = decideRestart(j.Spec.Restart, &j.Backoff, now, jitterSeed(j.ID, j.Backoff.Failures))
	if s.event != nil {
		s.event[j.ID] = eventDecision{ok: ok, delay: delayMs, why: why}
	}
	return ok, delayMs, why
}

// eventDecision is a job's restart decision within one event.
type eventDecision struct {
	ok    bool
	delay int64
	why   string
	// announced: the job's restart for the event is announced (its
	// message and job-restart event: announceRestart).
	announced bool
}
