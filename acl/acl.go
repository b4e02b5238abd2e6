// Package acl decides what an ACL token may do: given the policy of a
// request's token and the request's method and route, allowed or not. It is
// pure: no I/O, no clock, no net/http; the masters look tokens up and carry
// the decision out (master/acl.go), the replicated state keeps the tokens
// (fsm/acl.go).
//
// Vocabulary:
//   - token: what a user presents, by its secret (X-Jobmaster-Token or
//     Authorization: Bearer). The state keeps the secret's SHA-256 only,
//     with a public accessor id, a name and a policy.
//   - policy: what a token may do, one of read, submit and management. They
//     nest: submit holds read, management holds everything.
//   - route: a request's method and the pattern of the endpoint it reaches
//     ("PUT /v1/jobs/{id}"), as the masters' router names it.
//   - need: what a route requires: nothing (anyone), a node's certificate
//     (internal endpoints: tokens play no part, TLS decides), or a token of
//     at least one policy.
//
// The policy table is Routes below. A route without a row needs a
// management token: an endpoint added without a thought for ACLs is closed
// rather than open. Not every GET is a read: a task's log (GET
// /v1/jobs/{id}/logs) needs a submit token, as in Nomad, since it holds
// whatever the task printed (its secrets too), and whoever may submit may
// run a task that prints anything anyway. Why says so in a refusal.
package acl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Policy is what a token may do.
type Policy string

// Policies, from the least to the most.
const (
	// Read allows every read of jobs and of the cluster.
	Read Policy = "read"
	// Submit allows what Read does, and submitting and cancelling jobs.
	Submit Policy = "submit"
	// Management allows everything: the operator endpoints and tokens too.
	Management Policy = "management"
)

// Policies lists every policy, from the least to the most.
func Policies() []Policy { return []Policy{Read, Submit, Management} }

// Valid reports whether p is one of the policies.
func (p Policy) Valid() bool { return slices.Contains(Policies(), p) }

// ParsePolicy returns the policy named s, or an error listing them.
func ParsePolicy(s string) (Policy, error) {
	if p := Policy(s); p.Valid() {
		return p, nil
	}
	if s == "" {
		return "", errors.New("missing: use read, submit or management")
	}
	return "", fmt.Errorf("unknown policy %q: use read, submit or management", s)
}

// Need is what a route requires of a request.
type Need int

// Needs, from the least to the most. The order matters: a policy of rank r
// (Rank) satisfies every token need up to r.
const (
	// Nothing: anyone may call the route, with or without a token.
	Nothing Need = iota
	// Node: an internal endpoint, called by masters and executors, which
	// carry no token; with TLS the peer's certificate is checked instead
	// (docs/security.md).
	Node
	// NeedRead, NeedSubmit and NeedManagement: a token whose policy is at
	// least this one.
	NeedRead
	NeedSubmit
	NeedManagement
)

func (n Need) String() string {
	switch n {
	case Nothing:
		return "nothing"
	case Node:
		return "a node's certificate"
	case NeedRead:
		return "a read token"
	case NeedSubmit:
		return "a submit token"
	case NeedManagement:
		return "a management token"
	}
	return fmt.Sprintf("need(%d)", int(n))
}

// Token reports whether the need is for a token.
func (n Need) Token() bool { return n >= NeedRead }

// Route is a method and a router pattern.
type Route struct {
	Method  string
	Pattern string
}

func (r Route) String() string { return r.Method + " " + r.Pattern }

// Routes is the policy table: what each route of the masters' API needs. A
// new endpoint gets its row here; without one it needs a management token.
var Routes = map[Route]Need{
	// Anyone: load balancers and the CLI ask every master whether it knows
	// a leader; the bootstrap is answered once (409 afterwards), and before
	// it nobody has a token.
	{"GET", "/v1/health"}:         Nothing,
	{"POST", "/v1/acl/bootstrap"}: Nothing,
	// The UI's files (ui/): pages whose API calls carry the user's token
	// like any other client's.
	{"GET", "/ui/"}: Nothing,

	// read: every GET of jobs and the cluster.
	{"GET", "/v1/jobs"}:       NeedRead,
	{"GET", "/v1/jobs/{id}"}:  NeedRead,
	{"GET", "/v1/cluster"}:    NeedRead,
	{"GET", "/v1/state/hash"}: NeedRead,
	// Prometheus scrapes the metrics with a read token; the event stream
	// says what the job reads say, as it happens.
	{"GET", "/v1/metrics"}: NeedRead,
	{"GET", "/v1/events"}:  NeedRead,

	// submit: read, and submitting and cancelling jobs.
	{"PUT", "/v1/jobs/{id}"}:         NeedSubmit,
	{"POST", "/v1/jobs"}:             NeedSubmit,
	{"POST", "/v1/jobs/{id}/cancel"}: NeedSubmit,
	// A task's log, relayed from its executor: no read (see Why).
	{"GET", LogsPattern}: NeedSubmit,

	// management: the operator endpoints and tokens, their reads included
	// (a snapshot holds every job spec with its env; the token list names
	// every token).
	{"GET", "/v1/operator/snapshot"}:           NeedManagement,
	{"PUT", "/v1/operator/snapshot"}:           NeedManagement,
	{"GET", "/v1/operator/raft/peers"}:         NeedManagement,
	{"DELETE", "/v1/operator/raft/peers/{id}"}: NeedManagement,
	// Draining an executor moves other people's work: an operator's act.
	{"POST", "/v1/executors/{id}/drain"}:    NeedManagement,
	{"DELETE", "/v1/executors/{id}/drain"}:  NeedManagement,
	{"POST", "/v1/acl/tokens"}:              NeedManagement,
	{"GET", "/v1/acl/tokens"}:               NeedManagement,
	{"DELETE", "/v1/acl/tokens/{accessor}"}: NeedManagement,

	// Internal: executors push, and ask for their own drain when told to
	// stop, with their certificate, not a token; masters ask each other
	// for their Raft log position when their leader's process is gone,
	// relay submissions to the leader (each carrying its own token, which
	// the leader checks), and ask the leader for a token they do not know
	// yet.
	{"POST", "/v1/internal/executor-update"}: Node,
	{"POST", "/v1/internal/executor-drain"}:  Node,
	{"GET", "/v1/internal/raft-position"}:    Node,
	{"POST", "/v1/internal/submit-batch"}:    Node,
	{"GET", "/v1/internal/acl-token"}:        Node,
}

// LogsPattern is the route of a task's log, relayed by a master from the
// executor that ran the task.
const LogsPattern = "/v1/jobs/{id}/logs"

// whys says, for a route whose need a user may not expect, why it is what
// it is.
var whys = map[Route]string{
	{"GET", LogsPattern}: "a task's log holds whatever the task printed, its secrets too, so reading it is not part of the read policy",
}

// Why is the reason of a route's need, for a refusal to say ("" when the
// need speaks for itself). HEAD is GET.
func Why(method, pattern string) string {
	if method == "HEAD" {
		method = "GET"
	}
	return whys[Route{method, pattern}]
}

// CatchAll is the pattern of the router's catch-all, which only answers
// 404 for a path no endpoint serves and redirects / to /ui/: it needs
// nothing, whatever the method.
const CatchAll = "/"

// Needs is what a request with method on the route pattern requires: its
// row in Routes (HEAD is GET), else NeedManagement.
func Needs(method, pattern string) Need {
	if pattern == CatchAll {
		return Nothing
	}
	if n, ok := Routes[Route{method, pattern}]; ok {
		return n
	}
	if method == "HEAD" {
		if n, ok := Routes[Route{"GET", pattern}]; ok {
			return n
		}
	}
	return NeedManagement
}

// rank is the highest need a policy satisfies; an unknown policy
// satisfies no token need.
func rank(p Policy) Need {
	switch p {
	case Read:
		return NeedRead
	case Submit:
		return NeedSubmit
	case Management:
		return NeedManagement
	}
	return Node
}

// Satisfies reports whether a token of policy p meets need n. Needs that
// are not for a token (Nothing, Node) are met by any policy: tokens play
// no part in them.
func (p Policy) Satisfies(n Need) bool {
	if !n.Token() {
		return true
	}
	return rank(p) >= n
}

// Allowed reports whether a token of policy p may send a request with
// method to the route pattern.
func Allowed(p Policy, method, pattern string) bool {
	return p.Satisfies(Needs(method, pattern))
}

// Describe is a need as a refusal says it: "a read, submit or management
// token".
func Describe(n Need) string {
	var ps []string
	for _, p := range Policies() {
		if p.Satisfies(n) {
			ps = append(ps, string(p))
		}
	}
	switch len(ps) {
	case 0:
		return n.String()
	case 1:
		return "a " + ps[0] + " token"
	}
	return "a " + strings.Join(ps[:len(ps)-1], ", ") + " or " + ps[len(ps)-1] + " token"
}
