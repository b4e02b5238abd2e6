package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"jobmaster/jobspec"
)

// Role is what a certificate's holder is to the cluster.
type Role string

// Roles.
const (
	// Server is a master: it may join Raft, command executors and relay
	// requests to other masters.
	Server Role = "server"
	// Executor runs tasks: it may push its own state changes to the masters
	// and fetch partitions from other executors.
	Executor Role = "executor"
	// Client is a person or a tool using the API. It may do nothing a
	// request without a certificate may not.
	Client Role = "client"
)

// A is the role with its indefinite article, for messages: "a server",
// "an executor".
func (r Role) A() string {
	if r != "" && strings.ContainsRune("aeiou", rune(r[0])) {
		return "an " + string(r)
	}
	return "a " + string(r)
}

// Roles lists every role, in the order help texts name them.
var Roles = []Role{Server, Executor, Client}

// ParseRole reads a role as a user types it.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if s == string(r) {
			return r, nil
		}
	}
	return "", fmt.Errorf("role %q: use server, executor or client", s)
}

// Node reports whether the role is a node's (server or executor), whose
// certificate serves TLS as well as dials it.
func (r Role) Node() bool { return r == Server || r == Executor }

// Identity is who a certificate says its holder is.
type Identity struct {
	Role   Role
	NodeID string
}

// uriScheme is the scheme of the identity URI.
const uriScheme = "jobmaster"

// Check reports whether id can be put in a certificate: a known role and a
// node id that follows the rule for node ids (letters, digits, '.', '_'
// and '-').
func (id Identity) Check() error {
	if _, err := ParseRole(string(id.Role)); err != nil {
		return err
	}
	if err := jobspec.CheckID(id.NodeID); err != nil {
		return fmt.Errorf("node id: %w", err)
	}
	return nil
}

// URI is the identity URI: jobmaster://<role>/<node id>.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: uriScheme, Host: string(id.Role), Path: "/" + id.NodeID}
}

// String is the identity for messages: "server m1".
func (id Identity) String() string { return string(id.Role) + " " + id.NodeID }

// ErrNoIdentity is wrapped by IdentityOf's error for a certificate that
// carries no identity URI (one from another CA, say).
var ErrNoIdentity = errors.New("certificate carries no jobmaster identity")

// IdentityOf reads the identity a certificate carries: its one URI subject
// alternative name of scheme jobmaster, jobmaster://<role>/<node id>. Other
// URIs are ignored; none, two, or a malformed one is an error. It does not
// verify the certificate: that is the TLS handshake's job, done before.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	var found []*url.URL
	for _, u := range cert.URIs {
		if u.Scheme == uriScheme {
			found = append(found, u)
		}
	}
	switch len(found) {
	case 0:
		return Identity{}, ErrNoIdentity
	case 1:
	default:
		return Identity{}, fmt.Errorf("certificate carries %d jobmaster identities, want one", len(found))
	}
	u := found[0]
	role, err := ParseRole(u.Host)
	if err != nil {
		return Identity{}, fmt.Errorf("identity %s: %w", u, err)
	}
	id, ok := strings.CutPrefix(u.Path, "/")
	if !ok || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Identity{}, fmt.Errorf("identity %s: want %s://<role>/<node id>", u, uriScheme)
	}
	ident := Identity{Role: role, NodeID: id}
	if err := jobspec.CheckID(id); err != nil {
		return Identity{}, fmt.Errorf("identity %s: node id %w", u, err)
	}
	return ident, nil
}
