package pki

import (
	"fmt"
	"time"
)

// ExpiryWarnBefore is how long before its certificate expires a node
// starts to say so in its log (WatchExpiry).
const ExpiryWarnBefore = 14 * 24 * time.Hour

// ExpiryNotice is what a node says of its certificate, which expires at
// notAfter, at now: "" while it has more than ExpiryWarnBefore left; a
// warning before it expires, and that it has expired after. A node whose
// certificate expired keeps the connections it has (a heartbeat's stays
// open) and makes no new one: it is cut off at the next failover.
func ExpiryNotice(notAfter, now time.Time) (msg string, expired bool) {
	left := notAfter.Sub(now)
	switch {
	case notAfter.IsZero() || left > ExpiryWarnBefore:
		return "", false
	case left <= 0:
		return fmt.Sprintf("this node's TLS certificate expired %s ago (%s): peers refuse every new connection from it, and it is cut off once the ones it holds close (a leader change); issue a new one and send SIGHUP", (-left).Round(time.Minute), notAfter.UTC().Format(time.RFC3339)), true
	}
	return fmt.Sprintf("this node's TLS certificate expires in %s (%s): issue a new one ('jobmaster tls cert create') and send SIGHUP", left.Round(time.Minute), notAfter.UTC().Format(time.RFC3339)), false
}

// WatchExpiry calls say with ExpiryNotice of notAfter() at start, then
// every interval until quit closes: each notice at most once a day, but at
// once when the certificate has just expired.
func WatchExpiry(notAfter func() time.Time, now func() time.Time, interval time.Duration, quit <-chan struct{}, say func(msg string, expired bool)) {
	var last time.Time
	var lastExpired bool
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n := now()
		if msg, expired := ExpiryNotice(notAfter(), n); msg != "" && (last.IsZero() || n.Sub(last) >= 24*time.Hour || expired != lastExpired) {
			say(msg, expired)
			last, lastExpired = n, expired
		}
		select {
		case <-quit:
			return
		case <-t.C:
		}
	}
}
