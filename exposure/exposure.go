// Package exposure decides whether a node may start given where it listens
// and which protections it has on. A master or an executor whose HTTP, Raft
// or gossip address is not a loopback address is exposed: anyone who reaches
// those ports could run commands on the executors. An exposed node starts
// only with TLS, a gossip key and (a master) ACLs on, or with --insecure,
// which it then warns about. On loopback everything may run without them,
// as the tests do.
//
// The decision is pure (Judge); the node logs the warning or refuses with
// the verdict's error.
package exposure

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// Node is what the decision looks at.
type Node struct {
	// Role names the node in messages: "master" or "executor".
	Role string
	// Addrs are the node's listen addresses, each with its flag; an empty
	// value (no gossip, say) is not listened on.
	Addrs []Addr
	// TLS, GossipKey and ACL say which protections are on; NeedsACL says
	// whether the role has ACLs at all (masters do).
	TLS, GossipKey, ACL, NeedsACL bool
	// Insecure is --insecure: start exposed without them.
	Insecure bool
}

// Addr is a listen address and the flag that set it.
type Addr struct{ Flag, Value string }

// Verdict is the decision about one node.
type Verdict struct {
	Role string
	// Exposed lists the addresses that are not loopback ("--http-addr
	// 0.0.0.0:7401").
	Exposed []string
	// Missing lists the protections that are off, by the flags that turn
	// them on.
	Missing  []string
	Insecure bool
	// Malformed lists the addresses that are not host:port, with why: the
	// node cannot listen there, whatever its protections.
	Malformed []string
}

// Judge decides about n.
func Judge(n Node) Verdict {
	v := Verdict{Role: n.Role, Insecure: n.Insecure}
	for _, a := range n.Addrs {
		if a.Value == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.Value); err != nil {
			why := err.Error()
			var ae *net.AddrError
			if errors.As(err, &ae) {
				why = ae.Err
			}
			v.Malformed = append(v.Malformed, fmt.Sprintf("%s %q is not host:port (%s)", a.Flag, a.Value, why))
			continue
		}
		if !Loopback(a.Value) {
			v.Exposed = append(v.Exposed, a.Flag+" "+a.Value)
		}
	}
	if !n.TLS {
		v.Missing = append(v.Missing, "TLS (--tls-ca, --tls-cert, --tls-key)")
	}
	if !n.GossipKey {
		v.Missing = append(v.Missing, "a gossip key (--gossip-key or --gossip-keyring)")
	}
	if n.NeedsACL && !n.ACL {
		v.Missing = append(v.Missing, "ACLs (--acl)")
	}
	return v
}

// unprotected: the node is exposed and lacks a protection.
func (v Verdict) unprotected() bool { return len(v.Exposed) > 0 && len(v.Missing) > 0 }

// Refuse reports whether the node must not start.
func (v Verdict) Refuse() bool { return len(v.Malformed) > 0 || v.unprotected() && !v.Insecure }

// Warn reports whether the node starts, exposed and unprotected, because
// of --insecure.
func (v Verdict) Warn() bool { return v.unprotected() && v.Insecure }

// Err is the refusal, nil when the node may start.
func (v Verdict) Err() error {
	if !v.Refuse() {
		return nil
	}
	if len(v.Malformed) > 0 {
		return errors.New(strings.Join(v.Malformed, "; "))
	}
	return fmt.Errorf("this %s listens beyond loopback (%s) without %s: anyone who reaches these ports could run commands on the executors. Turn them on (docs/security.md), or start with --insecure to run without them",
		v.Role, strings.Join(v.Exposed, ", "), joinAnd(v.Missing))
}

// Warning is the warning to log when Warn, "" otherwise.
func (v Verdict) Warning() string {
	if !v.Warn() {
		return ""
	}
	return fmt.Sprintf("--insecure: listening beyond loopback (%s) without %s; anyone who reaches these ports can run commands on the executors",
		strings.Join(v.Exposed, ", "), joinAnd(v.Missing))
}

func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// Loopback reports whether a host:port listens on loopback only: an IP of
// the loopback range (127.0.0.0/8, ::1) or the name localhost. A host left
// out (":7401"), an unspecified one (0.0.0.0, ::) and any other name (it
// may resolve anywhere) are not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
