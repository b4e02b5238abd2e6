package master

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"jobmaster/acl"
	"jobmaster/api"
	"jobmaster/fsm"
)

// ACLs on a master (docs/security.md, "ACLs"). With --acl, a request to a
// route that needs a token (acl.Needs) carries the token's secret in
// X-Jobmaster-Token or Authorization: Bearer. The master that receives it
// checks it against its own copy of the replicated tokens:
//   - no secret: 401;
//   - a token it knows whose policy does not meet the need: 403 (tokens
//     never change, so the leader would say the same, or 401 if the token
//     was deleted meanwhile);
//   - a token it knows that meets the need: served, here or by the leader,
//     which checks it again against its own state when the request is
//     forwarded (the leader's state decides);
//   - a token it does not know (a token created a moment ago may not have
//     reached this master yet, or it restarted and is catching up): a
//     request for the leader is forwarded unverified, and the leader
//     decides; such a request is only ever served through onLeader, which
//     checks it on the leader (confirmCaller) if this master took over
//     meanwhile. One it serves itself (a stale read, a local endpoint) it
//     serves if the leader has the token (acl_leader.go), else 401; the
//     leader refuses what it does not know.
//
// The caller's token travels with the request in its context (callerOf),
// for the audit lines of writes.

// Request headers of a token.
const (
	tokenHeader = api.TokenHeader
	authHeader  = "Authorization"
)

// maxSecretBytes bounds a secret: a longer one is no token's.
const maxSecretBytes = 256

// requestSecret is the token secret r carries, "" if none.
func requestSecret(r *http.Request) string {
	if v := r.Header.Get(tokenHeader); v != "" {
		return strings.TrimSpace(v)
	}
	if scheme, rest, ok := strings.Cut(r.Header.Get(authHeader), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(rest)
	}
	return ""
}

// secretHash is the hex SHA-256 of a secret, as the state keeps it.
func secretHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// caller is who sent a request, as its token says.
type caller struct {
	token fsm.ACLToken
	// unverified: the token was not known where the request arrived; the
	// leader checks it (confirmCaller). hash is its secret's hash, need
	// what the route needs.
	unverified bool
	hash       string
	need       acl.Need
	// vouchedUntil: this master did not know the token, the leader did
	// when it had applied this index (tokenFromLeader); until this master
	// has applied as far, the leader's word stands.
	vouchedUntil uint64
}

type callerKey struct{}

// callerOf is the caller of r (nil with ACLs off, or on a route that needs
// no token).
func callerOf(r *http.Request) *caller {
	c, _ := r.Context().Value(callerKey{}).(*caller)
	return c
}

func withCaller(r *http.Request, c *caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
}

// lookupToken finds the token whose secret hashes to hash in this master's
// state, in the table the FSM publishes after every apply (no lock: a
// request does not wait for an apply in progress). It is indexed by the
// hash; the hash found is compared again in constant time, so that nothing
// in the answer's timing depends on how much of a guessed secret's hash
// matched.
func (m *Master) lookupToken(hash string) (fsm.ACLToken, bool) {
	t, ok := m.fsm.Tokens().Lookup(hash)
	if !ok || subtle.ConstantTimeCompare([]byte(t.SecretHash), []byte(hash)) != 1 {
		return fsm.ACLToken{}, false
	}
	return t, true
}

// leaderRoutes are the routes whose handlers serve only through onLeader
// (leaderWrite, leaderRead without ?stale, submit): a request to one of
// them with a token this master does not know may be forwarded unverified.
// A route missing here is checked where it arrives, which is always safe.
var leaderRoutes = map[acl.Route]bool{
	{Method: "GET", Pattern: "/v1/jobs"}:                        true,
	{Method: "POST", Pattern: "/v1/jobs"}:                       true,
	{Method: "GET", Pattern: "/v1/jobs/{id}"}:                   true,
	{Method: "PUT", Pattern: "/v1/jobs/{id}"}:                   true,
	{Method: "POST", Pattern: "/v1/jobs/{id}/cancel"}:           true,
	{Method: "GET", Pattern: "/v1/cluster"}:                     true,
	{Method: "GET", Pattern: "/v1/operator/snapshot"}:           true,
	{Method: "GET", Pattern: "/v1/operator/raft/peers"}:         true,
	{Method: "DELETE", Pattern: "/v1/operator/raft/peers/{id}"}: true,
	{Method: "POST", Pattern: "/v1/acl/tokens"}:                 true,
	{Method: "GET", Pattern: "/v1/acl/tokens"}:                  true,
	{Method: "DELETE", Pattern: "/v1/acl/tokens/{accessor}"}:    true,
}

// authorize applies the route's need to r's token. It answers 401 or 403
// and returns false, or returns r with its caller.
func (m *Master) authorize(w http.ResponseWriter, r *http.Request, route acl.Route) (*http.Request, bool) {
	need := acl.Needs(route.Method, route.Pattern)
	if !need.Token() {
		return r, true
	}
	secret := requestSecret(r)
	if secret == "" {
		msg := fmt.Sprintf("this request needs an ACL token (%s): send its secret in %s or %s: Bearer (jobmaster: --token or $JOBMASTER_TOKEN)",
			acl.Describe(need), tokenHeader, authHeader)
		if !m.aclBootstrapped() {
			msg += "; no token exists yet: create the first, a management token, with POST /v1/acl/bootstrap (jobmaster acl bootstrap)"
		}
		m.refuse(w, r, http.StatusUnauthorized, msg)
		return nil, false
	}
	hash := ""
	if len(secret) <= maxSecretBytes {
		hash = secretHash(secret)
	}
	t, known := m.lookupToken(hash)
	var until uint64
	switch {
	case known || hash == "":
	case leaderRoutes[route] && !staleRead(r) && m.currentSession() == nil:
		return withCaller(r, &caller{unverified: true, hash: hash, need: need}), true
	default:
		var busy bool
		t, until, known, busy = m.tokenFromLeader(r.Context(), hash)
		if busy {
			w.Header().Set("Retry-After", "1")
			m.refuse(w, r, http.StatusServiceUnavailable, errTokenAsksBusy.Error())
			return nil, false
		}
		if known && until <= m.appliedIndex() {
			// This master has applied as far as the leader had, and
			// does not know the token: it was deleted since.
			t, known = m.lookupToken(hash)
			until = 0
		}
	}
	if !known {
		m.refuse(w, r, http.StatusUnauthorized, "ACL token not found: it was deleted, or never created")
		return nil, false
	}
	if !t.Policy.Satisfies(need) {
		m.refuse(w, r, http.StatusForbidden, denied(t, r, need))
		return nil, false
	}
	return withCaller(r, &caller{token: t, need: need, vouchedUntil: until}), true
}

// aclBootstrapped reports whether this master has applied the ACL
// bootstrap.
func (m *Master) aclBootstrapped() bool {
	var on bool
	m.fsm.Read(func(st *fsm.State) { on = st.ACLBootstrapped() })
	return on
}

// stillAllowed reports whether r's token still exists and still allows
// r's route: a request that lasts (an event stream) ends once its token is
// deleted, as every later request with it is refused.
func (m *Master) stillAllowed(r *http.Request) bool {
	c := callerOf(r)
	if c == nil || c.unverified {
		return true
	}
	t, ok := m.lookupToken(c.token.SecretHash)
	if !ok && c.vouchedUntil > 0 && m.appliedIndex() < c.vouchedUntil {
		return true // not yet applied here as far as the leader had
	}
	return ok && t.Policy.Satisfies(c.need)
}

// confirmCaller checks, on the leader, the token of a request that arrived
// here unverified. It answers 401 or 403 and returns false, or returns r
// with its caller.
func (m *Master) confirmCaller(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	c := callerOf(r)
	if c == nil || !c.unverified {
		return r, true
	}
	t, known := m.lookupToken(c.hash)
	switch {
	case !known:
		m.refuse(w, r, http.StatusUnauthorized, "ACL token not found: it was deleted, or never created")
		return nil, false
	case !t.Policy.Satisfies(c.need):
		m.refuse(w, r, http.StatusForbidden, denied(t, r, c.need))
		return nil, false
	}
	return withCaller(r, &caller{token: t, need: c.need}), true
}

// denied is the message of a 403, with the reason of the route's need
// when it has one (acl.Why; r.Pattern is the route's, set by guard).
func denied(t fsm.ACLToken, r *http.Request, need acl.Need) string {
	msg := fmt.Sprintf("permission denied: token %s (policy %s) may not %s %s: it needs %s",
		tokenName(t), t.Policy, r.Method, r.URL.Path, acl.Describe(need))
	if why := acl.Why(r.Method, r.Pattern); why != "" {
		msg += " (" + why + ")"
	}
	return msg
}

// tokenName names a token in messages and logs: its name, else its
// accessor id.
func tokenName(t fsm.ACLToken) string {
	if t.Name != "" {
		return fmt.Sprintf("%q", t.Name)
	}
	return "with accessor " + t.AccessorID
}

// refuse answers an ACL refusal. A 401 names the scheme a token goes by.
// The refusal is logged at debug level: anyone can send requests, and the
// log must not be theirs to fill.
func (m *Master) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="jobmaster"`)
	}
	m.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "status", status, "reason", msg)
	writeError(w, status, msg)
}

// audit logs a write carried out on the leader, with the name of the token
// that asked for it (never its secret): who submitted, cancelled,
// restored, removed a master, or changed tokens.
func (m *Master) audit(r *http.Request, action string, args ...any) {
	m.auditAs(callerOf(r), action, args...)
}

// auditAs is audit for the caller c.
func (m *Master) auditAs(c *caller, action string, args ...any) {
	who := []any{"action", action}
	switch {
	case !m.cfg.ACL:
		who = append(who, "token", "anonymous (ACLs off)")
	case c != nil:
		who = append(who, "token", c.token.Name, "accessor", c.token.AccessorID, "policy", c.token.Policy)
	default:
		who = append(who, "token", "none")
	}
	m.log.Info("audit", append(who, args...)...)
}
