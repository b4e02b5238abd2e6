package pki

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExpiryNotice(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	msg, _ := ExpiryNotice(now.Add(30*24*time.Hour), now)
	require.Empty(t, msg, "a month left")
	msg, _ = ExpiryNotice(time.Time{}, now)
	require.Empty(t, msg, "no certificate")
	msg, expired := ExpiryNotice(now.Add(3*24*time.Hour), now)
	require.False(t, expired)
	require.Contains(t, msg, "expires in 72h0m0s")
	msg, expired = ExpiryNotice(now.Add(-90*time.Second), now)
	require.True(t, expired)
	require.Contains(t, msg, "expired 2m0s ago")
}

// A notice is said at start, then at most once a day, and at once when
// the certificate has just expired.
func TestWatchExpirySaysItOnceADay(t *testing.T) {
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	notAfter := start.Add(3 * time.Hour)
	clock := start
	ticks := 0
	quit := make(chan struct{})
	var said []bool
	now := func() time.Time {
		ticks++
		if ticks > 30 {
			// Once: the watch may still take a tick that came with the
			// close (select picks either), and ask the time again.
			if ticks == 31 {
				close(quit)
			}
			return clock
		}
		c := clock
		clock = clock.Add(time.Hour)
		return c
	}
	WatchExpiry(func() time.Time { return notAfter }, now, time.Nanosecond, quit, func(_ string, expired bool) { said = append(said, expired) })
	require.Equal(t, []bool{false, true, true}, said, "a warning at start, the expiry when it comes, and again a day later")
}
