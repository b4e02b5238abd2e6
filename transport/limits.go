package transport

import "jobmaster/api"

// Body limits. They are untyped constants so that callers can compare them
// with an int or an int64 alike.
const (
	// MaxRequestBytes bounds a request body; a server answers a larger one
	// with 413 (docs/api.md).
	MaxRequestBytes = api.MaxBodyBytes
	// MaxResponseBytes bounds a peer's answer read whole: a heartbeat's
	// report, a deploy's answer, a push's acknowledgments, a forwarded API
	// answer. A larger JSON answer is ErrTooLarge.
	MaxResponseBytes = 64 << 20
)
