package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
)

// ErrOutcomeUnknown is wrapped by the error of a non-idempotent request (a
// POST) that failed after it may have reached a master: the master may or may
// not have acted on it, and the client does not resend it.
var ErrOutcomeUnknown = errors.New("the request may have reached a master; its outcome is unknown")

// APIError is a final answer from a server that is not a success: a 4xx (bad
// request, unknown job, conflict, ...) or a 5xx that retrying cannot fix.
// Callers match it with errors.As.
type APIError struct {
	// StatusCode is the HTTP status of the answer.
	StatusCode int
	// Message is the server's {"error": "..."} message, or the start of the
	// body when it was not one.
	Message string
	// Method and Path name the request that got the answer.
	Method, Path string
}

// Error returns the server's message with the status, or the request and the
// status when the server gave no message.
func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s %s: HTTP %d %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.StatusCode)
}

// IsNotFound reports whether err is (or wraps) an *APIError with status 404.
func IsNotFound(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound
}

// NotMasterError is the failure of an address whose answer came from
// another role (an executor's address given for a master's): the client
// tried the next address.
type NotMasterError struct {
	Address string // base URL
	Role    string // what answered, from its X-Jobmaster-Role
}

func (e *NotMasterError) Error() string {
	return fmt.Sprintf("%s is an %s, not a master", displayAddr(e.Address), e.Role)
}

// NotMasters reports whether every address tried answered as another role
// than a master's.
func (e *UnreachableError) NotMasters() bool {
	for _, a := range e.Attempts {
		if _, ok := errors.AsType[*NotMasterError](a.Err); !ok {
			return false
		}
	}
	return len(e.Attempts) > 0
}

// Untrusted reports whether every master that could be reached failed
// the TLS handshake on a certificate (see TrustFailure), the others being
// out of reach (down, or the connection failed): retrying cannot fix that
// (the masters share a CA), a different CA or client certificate can.
func (e *UnreachableError) Untrusted() bool {
	return e.trustFailure() != nil
}

// trustFailure is the first trust failure of an Untrusted error, nil if
// it is not one.
func (e *UnreachableError) trustFailure() error {
	var first error
	for _, a := range e.Attempts {
		switch {
		case TrustFailure(a.Err):
			if first == nil {
				first = a.Err
			}
		case answered(a.Err):
			return nil
		}
	}
	return first
}

// RefusedCertificate reports whether the trust failure of an Untrusted
// error is the master's refusal of this client's certificate.
func (e *UnreachableError) RefusedCertificate() bool {
	err := e.trustFailure()
	return err != nil && RefusedCertificate(err)
}

// answered reports whether err is an answer from a server (a status, or
// another role's answer) rather than a failure to reach it.
func answered(err error) bool {
	if _, ok := errors.AsType[*APIError](err); ok {
		return true
	}
	_, ok := errors.AsType[*NotMasterError](err)
	return ok
}

// Refused reports whether every master tried refused the connection:
// nothing listened at any address.
func (e *UnreachableError) Refused() bool {
	for _, a := range e.Attempts {
		if !errors.Is(a.Err, syscall.ECONNREFUSED) {
			return false
		}
	}
	return len(e.Attempts) > 0
}

// TimedOut reports whether some master took the request but gave no
// answer in time (one waiting for a leader holds a request up to its
// request wait, 5 s by default), rather than being out of reach.
func (e *UnreachableError) TimedOut() bool {
	for _, a := range e.Attempts {
		if describe(a.Err) == "timed out" && !sentNothing(a.Err) {
			return true
		}
	}
	return false
}

// NeverConnected reports whether every master tried timed out before a
// request could be sent to it: the deadline was too short to connect, or
// the addresses swallow connections (a firewall that drops them).
func (e *UnreachableError) NeverConnected() bool {
	for _, a := range e.Attempts {
		if describe(a.Err) != "timed out" || !sentNothing(a.Err) {
			return false
		}
	}
	return len(e.Attempts) > 0
}

// sharedTrustFailure reports whether the failures of a round (nil: not
// tried) say that no master of this cluster can be trusted, whatever the
// wait: some refused on the CA (the master's certificate is of a CA this
// client does not trust, or the master refused this client's), which the
// masters share, and every other one failed on trust too or was out of
// reach (refused or unroutable; not one that took the request and held
// it, nor one whose own certificate failed on its name or dates).
func sharedTrustFailure(last []error) bool {
	ca := false
	for _, err := range last {
		switch {
		case err == nil:
		case caTrustFailure(err):
			ca = true
		case TrustFailure(err), outOfReach(err):
		default:
			return false
		}
	}
	return ca
}

// caTrustFailure reports whether err is a handshake refused on the CA: the
// master's certificate is of a CA this client does not trust, or the
// master refused this client's certificate.
func caTrustFailure(err error) bool {
	var unknownCA x509.UnknownAuthorityError
	return errors.As(err, &unknownCA) || RefusedCertificate(err)
}

// outOfReach reports whether err says no server was there to take the
// request: the connection was refused, or the host cannot be reached or
// resolved.
func outOfReach(err error) bool {
	var dnsErr *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.As(err, &dnsErr)
}

// TrustFailure reports whether err is a TLS handshake that failed on a
// certificate: the master's, which this client does not trust (an
// unknown CA, a name it does not cover, expired), or this client's, which
// the master refused (none given, or one it does not trust). Waiting
// does not change either.
func TrustFailure(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &verify) || errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return true
	}
	return RefusedCertificate(err)
}

// RefusedCertificate reports whether the master's end of a TLS handshake
// refused this client's certificate (or its lack of one).
func RefusedCertificate(err error) bool {
	// crypto/tls reports an alert the peer sent as a net.OpError "remote
	// error" around the alert; the alerts on certificates (bad, unknown,
	// expired, revoked, unsupported certificate, unknown certificate
	// authority, certificate required) all name one.
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "remote error" && opErr.Err != nil &&
		strings.Contains(opErr.Err.Error(), "certificate")
}

// Attempt is what one master said (or failed to say) to a request.
type Attempt struct {
	// Address is the master's base URL, http://host:port.
	Address string
	// Err is the last failure seen from that master.
	Err error
}

// UnreachableError is returned when no master gave a usable answer before
// the call's deadline: each was unreachable, timed out or had no leader.
type UnreachableError struct {
	// Attempts holds the last failure of every master tried, in list order.
	Attempts []Attempt
}

// Error lists every address tried with what it said.
func (e *UnreachableError) Error() string {
	parts := make([]string, len(e.Attempts))
	for i, a := range e.Attempts {
		parts[i] = fmt.Sprintf("%s (%s)", displayAddr(a.Address), describe(a.Err))
	}
	if e.NoLeader() {
		return "no leader; tried " + strings.Join(parts, ", ")
	}
	return "no master answered; tried " + strings.Join(parts, ", ")
}

// NoLeader reports whether some master answered but had no leader (a 503):
// the masters are up but have no quorum, rather than unreachable.
func (e *UnreachableError) NoLeader() bool {
	for _, a := range e.Attempts {
		if apiErr, ok := errors.AsType[*APIError](a.Err); ok && apiErr.StatusCode == http.StatusServiceUnavailable {
			return true
		}
	}
	return false
}

// Unwrap returns the failure of every master tried.
func (e *UnreachableError) Unwrap() []error {
	errs := make([]error, len(e.Attempts))
	for i, a := range e.Attempts {
		errs[i] = a.Err
	}
	return errs
}

// Describe shortens an error of one master for people: "connection
// refused", "timed out", the master's message.
func Describe(err error) string { return describe(err) }

// describe shortens a transport error for people: "connection refused"
// rather than Go's full `Get "http://...": dial tcp ...: connect: ...`.
func describe(err error) string {
	var apiErr *APIError
	var dnsErr *net.DNSError
	var netErr net.Error
	var notMaster *NotMasterError
	switch {
	case err == nil:
		return "no answer"
	case errors.As(err, &notMaster):
		return "an " + notMaster.Role + ", not a master"
	case errors.As(err, &apiErr):
		return apiErr.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &dnsErr):
		return "cannot resolve host: " + dnsErr.Err
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err.Error()
	}
	return err.Error()
}

// notSent marks a transport error of a request that never got a
// connection, so it cannot have reached a server.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// sentNothing reports whether a transport error proves the request never
// reached a server: the connection could not be set up at all.
func sentNothing(err error) bool {
	if _, ok := errors.AsType[notSent](err); ok {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}

// shortError shows a transport error the way describe does while keeping
// it available to errors.Is and errors.As.
type shortError struct{ err error }

func (e shortError) Error() string { return describe(e.err) }
func (e shortError) Unwrap() error { return e.err }
