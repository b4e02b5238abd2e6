package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"jobmaster/pki"
)

// TLSFiles names the PEM files of a role's TLS setup: the CA certificates it
// trusts (--tls-ca; several in one file while a CA is rotated) and its own
// certificate and key (--tls-cert, --tls-key).
type TLSFiles struct {
	CA, Cert, Key string
}

// On reports whether any file is named: TLS is wanted.
func (f TLSFiles) On() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// CheckNode reports whether f is complete for a node, which needs all
// three files.
func (f TLSFiles) CheckNode() error {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return errors.New("--tls-ca, --tls-cert and --tls-key go together: give all three, or none")
	}
	return nil
}

// TLS is a role's TLS material, loaded from its TLSFiles: the pool of CAs
// it trusts and, for a node, its certificate and the identity it carries.
// Reload reads the files again; every TLS connection set up afterwards,
// served or dialed, uses what it read (connections already up keep theirs).
// Its methods are safe for concurrent use.
//
// Every connection is verified in full: the peer's chain against the
// trusted CAs, a server's certificate against the host dialed (its IP or
// DNS subject alternative names), and, where the caller asks, the peer's
// identity (a PeerCheck).
type TLS struct {
	files TLSFiles

	mu  sync.RWMutex
	cur *material
}

// material is what one load of the files yields.
type material struct {
	pool *x509.CertPool   // the trusted CAs; nil: the system's roots
	cert *tls.Certificate // nil: none (a client that presents none)
	id   pki.Identity     // cert's identity; set when cert is
}

// LoadTLS reads files. CA may be empty (the system's roots are trusted:
// for a client reaching masters behind a public certificate); Cert and Key
// go together, and the certificate must carry a jobmaster identity
// (pki.IdentityOf) and be issued by one of the trusted CAs.
func LoadTLS(files TLSFiles) (*TLS, error) {
	m, err := load(files)
	if err != nil {
		return nil, err
	}
	return &TLS{files: files, cur: m}, nil
}

func load(f TLSFiles) (*material, error) {
	m := &material{}
	if f.CA != "" {
		b, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("CA certificates: %w", err)
		}
		certs, err := pki.ParseCerts(b)
		if err != nil {
			return nil, fmt.Errorf("CA certificates %s: %w", f.CA, err)
		}
		m.pool = x509.NewCertPool()
		for _, c := range certs {
			m.pool.AddCert(c)
		}
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("a certificate and its key go together: give both files, or neither")
	}
	if f.Cert == "" {
		return m, nil
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("certificate %s with key %s: %w", f.Cert, f.Key, err)
	}
	id, err := pki.IdentityOf(cert.Leaf)
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w (issue it with 'jobmaster tls cert create')", f.Cert, err)
	}
	if m.pool != nil {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: m.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return nil, fmt.Errorf("certificate %s is not vouched for by the CAs in %s: %w", f.Cert, f.CA, err)
		}
	}
	m.cert, m.id = &cert, id
	return m, nil
}

// Reload reads the files again. It changes nothing when they cannot be read
// or are not valid, nor when the new certificate names another identity
// than the old one (a node keeps its role and id for its whole life).
func (t *TLS) Reload() error {
	m, err := load(t.files)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.cur; old.cert != nil && m.id != old.id {
		return fmt.Errorf("certificate %s is now for %s, but this node is %s: not reloaded", t.files.Cert, m.id, old.id)
	}
	t.cur = m
	return nil
}

// Files are the files t reads.
func (t *TLS) Files() TLSFiles { return t.files }

// Identity is the identity of the role's own certificate; ok is false when
// it has none.
func (t *TLS) Identity() (id pki.Identity, ok bool) {
	m := t.current()
	return m.id, m.cert != nil
}

// CheckIdentity reports whether the role's own certificate carries want:
// a node refuses to start with another node's certificate, or another
// role's.
func (t *TLS) CheckIdentity(want pki.Identity) error {
	id, ok := t.Identity()
	if !ok {
		return errors.New("no certificate: give --tls-cert and --tls-key")
	}
	if id != want {
		return fmt.Errorf("certificate %s is for %s, but this node is %s: issue one with 'jobmaster tls cert create --role %s --node-id %s'",
			t.files.Cert, id, want, want.Role, want.NodeID)
	}
	return nil
}

// NotAfter is when the role's own certificate expires (zero without one).
func (t *TLS) NotAfter() time.Time {
	if m := t.current(); m.cert != nil {
		return m.cert.Leaf.NotAfter
	}
	return time.Time{}
}

func (t *TLS) current() *material {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.cur
}

// PeerCheck decides whether a peer whose certificate was verified, and
// carries id, may use the connection; its error aborts the handshake.
type PeerCheck func(id pki.Identity) error

// NodePeer admits a server or an executor: what a node's client requires of
// the nodes it dials (a client certificate cannot even serve TLS).
func NodePeer(id pki.Identity) error {
	if !id.Role.Node() {
		return fmt.Errorf("peer presents %s certificate, want a server's or an executor's", id.Role.A())
	}
	return nil
}

// ServerOnly admits a server (a master): what Raft requires of both ends.
func ServerOnly(id pki.Identity) error {
	if id.Role != pki.Server {
		return fmt.Errorf("peer presents %s certificate (%s), want a server's", id.Role.A(), id.NodeID)
	}
	return nil
}

// ExecutorOnly admits an executor: what an executor requires of the
// executor it fetches a partition from.
func ExecutorOnly(id pki.Identity) error {
	if id.Role != pki.Executor {
		return fmt.Errorf("peer presents %s certificate (%s), want an executor's", id.Role.A(), id.NodeID)
	}
	return nil
}

// ServerConfig is the configuration of a TLS listener. Each handshake takes
// the material current at that moment. A peer's certificate is asked for
// and, when given, verified against the trusted CAs; with require, a peer
// without one is refused. check, when not nil, is applied to the identity
// of a peer that gave a certificate (with require: of every peer), and a
// certificate without an identity is then refused.
func (t *TLS) ServerConfig(require bool, check PeerCheck) *tls.Config {
	return t.serverConfig(require, check, nil)
}

// serverConfig is ServerConfig; node, when not nil, is told of each
// connection (the TCP one under TLS) whose peer proved a node's identity
// (a master's or an executor's certificate) in its handshake.
func (t *TLS) serverConfig(require bool, check PeerCheck, node func(net.Conn)) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if require {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			m := t.current()
			if m.cert == nil {
				return nil, errors.New("no certificate to serve TLS with")
			}
			verify := verifyPeer(check, false)
			if node != nil && hello.Conn != nil {
				conn, then := hello.Conn, verify
				verify = func(cs tls.ConnectionState) error {
					if then != nil {
						if err := then(cs); err != nil {
							return err
						}
					}
					if len(cs.PeerCertificates) > 0 {
						if id, err := pki.IdentityOf(cs.PeerCertificates[0]); err == nil && id.Role.Node() {
							node(conn)
						}
					}
					return nil
				}
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*m.cert},
				ClientCAs:    m.pool,
				ClientAuth:   auth,
				// Every config is fresh, so a session ticket could never be
				// used again: issue none.
				SessionTicketsDisabled: true,
				VerifyConnection:       verify,
			}, nil
		},
	}
}

// clientConfig is the configuration of one connection dialed to
// serverName (a host or an IP, which the peer's certificate must cover),
// from the material current now.
func (t *TLS) clientConfig(serverName string, check PeerCheck) *tls.Config {
	m := t.current()
	c := &tls.Config{
		MinVersion:       tls.VersionTLS12,
		RootCAs:          m.pool,
		ServerName:       serverName,
		VerifyConnection: verifyPeer(check, true),
	}
	if m.cert != nil {
		c.Certificates = []tls.Certificate{*m.cert}
	}
	return c
}

// verifyPeer applies check to the peer's identity, after the handshake has
// verified its chain. A client always has a peer certificate; a server
// (asked, not requiring) may have none, which check does not see.
func verifyPeer(check PeerCheck, client bool) func(tls.ConnectionState) error {
	if check == nil {
		return nil
	}
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			if client {
				return errors.New("peer presented no certificate")
			}
			return nil
		}
		id, err := pki.IdentityOf(cs.PeerCertificates[0])
		if err != nil {
			return err
		}
		return check(id)
	}
}

// DialTLS connects to addr (host:port) and completes a TLS handshake with
// the current material: the peer must present a certificate for addr's
// host from a trusted CA that check (if not nil) admits.
func (t *TLS) DialTLS(ctx context.Context, d *net.Dialer, addr string, check PeerCheck) (*tls.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	td := &tls.Dialer{NetDialer: d, Config: t.clientConfig(host, check)}
	c, err := td.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.(*tls.Conn), nil
}

// PeerIdentity is the identity in the certificate the peer of r presented,
// verified by the handshake; ok is false for a request without TLS, without
// a client certificate, or with one that carries no identity.
func PeerIdentity(r *http.Request) (id pki.Identity, ok bool) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return pki.Identity{}, false
	}
	id, err := pki.IdentityOf(r.TLS.PeerCertificates[0])
	return id, err == nil
}

// AnswerFrom checks, for a client that speaks TLS, that resp came over
// TLS from a certificate of role for node (node "": any of role): an
// answer in the clear, or from another certificate, is not node's,
// whatever it says. at names where it came from, in errors.
func AnswerFrom(resp *http.Response, at string, role pki.Role, node string) error {
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		return fmt.Errorf("the answer at %s came without TLS", at)
	}
	id, err := pki.IdentityOf(resp.TLS.PeerCertificates[0])
	if err != nil {
		return fmt.Errorf("the answer at %s: %w", at, err)
	}
	if id.Role != role || node != "" && id.NodeID != node {
		return fmt.Errorf("the answer at %s comes from the certificate of %s, not of %s %s", at, id, role, node)
	}
	return nil
}
