package ui

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// A master refuses every request whose Origin is not its own (drive-by
// requests, docs/security.md). One exception keeps the UI alive when the
// master that served it dies: a page of one of the cluster's masters may
// *read* the others. Writes stay same-origin, so a cancel is sent to the
// page's own master, which forwards it to the leader.

// PeerReads are the routes a page may read from another master than its
// own: what the UI shows. Neither the operator endpoints (a snapshot holds
// every job's env) nor the token list are among them. A task's log is (its
// token decides, as on the page's own master: a submit token).
var PeerReads = map[string]bool{
	"/v1/jobs":           true,
	"/v1/jobs/{id}":      true,
	"/v1/jobs/{id}/logs": true,
	"/v1/cluster":        true,
	"/v1/events":         true,
	"/v1/state/hash":     true,
	"/v1/health":         true,
}

// CrossOrigin is what a master does with a request from another origin.
type CrossOrigin int

const (
	// Refuse: the drive-by check answers it (403).
	Refuse CrossOrigin = iota
	// AllowRead: serve it as any request, with the CORS headers that let
	// the page read the answer.
	AllowRead
	// AnswerPreflight: answer the browser's preflight (OPTIONS) with the
	// CORS headers, 204, and nothing else.
	AnswerPreflight
)

// Decide is the rule for a request from origin (not the master's own) to
// the route pattern, given the origins of the cluster's masters: a GET or
// HEAD of a PeerReads route from a master's origin is allowed, and so is
// the preflight of such a GET that asks for no other header than the
// token's. Everything else is refused.
func Decide(method, pattern, origin string, preflightMethod, preflightHeaders string, peers []string) CrossOrigin {
	if !PeerReads[pattern] || !isPeer(origin, peers) {
		return Refuse
	}
	switch method {
	case http.MethodGet, http.MethodHead:
		return AllowRead
	case http.MethodOptions:
		if preflightMethod != http.MethodGet || !onlyTokenHeader(preflightHeaders) {
			return Refuse
		}
		return AnswerPreflight
	}
	return Refuse
}

// TokenHeader is the one header a page sends across origins.
const TokenHeader = "X-Jobmaster-Token"

// IndexHeader and ExecutorHeader are the answer headers a page reads
// across origins: the index a read of the state was made at, the executor
// a task's log was read from.
const (
	IndexHeader    = "X-Jobmaster-Index"
	ExecutorHeader = "X-Jobmaster-Executor"
)

// SetCORS sets the headers of an allowed cross-origin read or preflight.
// No credentials: the token travels in a header, never in a cookie.
func SetCORS(h http.Header, origin string, preflight bool) {
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	if preflight {
		h.Set("Access-Control-Allow-Methods", "GET")
		h.Set("Access-Control-Allow-Headers", TokenHeader)
		h.Set("Access-Control-Max-Age", "600")
		return
	}
	h.Set("Access-Control-Expose-Headers", IndexHeader+", "+ExecutorHeader)
}

// Origins are the origins of masters at the HTTP addresses (host:port):
// scheme://host:port, in lower case. Empty addresses are left out.
func Origins(scheme string, addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if a == "" {
			continue
		}
		out = append(out, strings.ToLower(scheme+"://"+a))
	}
	return out
}

// isPeer reports whether origin is exactly one of the peers' origins.
func isPeer(origin string, peers []string) bool {
	if !validOrigin(origin) {
		return false
	}
	o := strings.ToLower(origin)
	for _, p := range peers {
		if o == p {
			return true
		}
	}
	return false
}

// validOrigin reports whether o is scheme://host:port and nothing more:
// what a browser sends, and what may stand in a CSP source list.
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" || port == "" {
		return false
	}
	return !strings.ContainsAny(o, " ;,'\"")
}

// onlyTokenHeader reports whether a preflight's Access-Control-Request-Headers
// asks for the token's header at most.
func onlyTokenHeader(list string) bool {
	for _, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		if h != "" && !strings.EqualFold(h, TokenHeader) {
			return false
		}
	}
	return true
}
