// Package client is the Go client of the masters' HTTP API (the bodies are
// in package api) and of the executors' log endpoint; a task's log whose
// executor cannot be reached is read through the masters (LogsOf).
//
// A Client holds a list of master addresses. Any master answers any request
// (followers forward to the leader), so a call goes to the master that last
// answered, or to the leader that master named (api.LeaderHeader) when it
// is one of the client's addresses, and fails over to the next one when a
// master cannot be reached,
// hangs past the attempt timeout, or answers 503 (no leader yet), 502 or 504
// (a failed forward). When every master has failed, the client pauses (100
// ms, doubling up to 1 s) and tries the whole list again, until the call's
// deadline; it then returns an *UnreachableError saying what each master
// said. A 4xx answer is final and comes back as an *APIError. So is a TLS
// handshake that fails on a certificate (see TrustFailure) at every master,
// or an answer that is not a master's: the client returns at once, since
// waiting fixes neither.
//
// Retries never duplicate work. GET and PUT requests are idempotent, and so
// is a cancel; they are retried freely. POST /v1/jobs is resent only when it
// provably never left the client (the connection could not be set up); when
// it may have reached a master and no answer came, the error wraps
// ErrOutcomeUnknown. Submit with SubmitJob (PUT, idempotent by id) when
// retries must be safe.
package client
