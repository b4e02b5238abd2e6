package cluster

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"jobmaster/client"
	"jobmaster/membership"
	"jobmaster/pki"
	"jobmaster/transport"
)

// security is a secure cluster's credentials: a CA, the nodes'
// certificates issued as they are added, a certificate for the harness and
// a gossip keyring, all in one directory.
type security struct {
	dir     string
	ca      *pki.CA
	keyring string
	harness transport.TLSFiles
	tls     *transport.TLS // the harness's
}

func newSecurity(dir string) (*security, error) {
	ca, err := pki.NewCA(rand.Reader, time.Now(), 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	if _, _, err := pki.WriteCA(dir, ca); err != nil {
		return nil, err
	}
	key, err := membership.NewKey()
	if err != nil {
		return nil, err
	}
	s := &security{dir: dir, ca: ca, keyring: filepath.Join(dir, "gossip.keyring")}
	if err := membership.WriteKeyring(s.keyring, []string{key}); err != nil {
		return nil, err
	}
	s.harness = s.files(pki.Client, "bench")
	if s.tls, err = transport.LoadTLS(s.harness); err != nil {
		return nil, err
	}
	return s, nil
}

// files issues a certificate for role and id, once, and returns its
// holder's TLS files.
func (s *security) files(role pki.Role, id string) transport.TLSFiles {
	ident := pki.Identity{Role: role, NodeID: id}
	f := transport.TLSFiles{CA: filepath.Join(s.dir, pki.CAFile), Cert: filepath.Join(s.dir, pki.CertFile(ident)), Key: filepath.Join(s.dir, pki.KeyFile(ident))}
	is, err := s.ca.Issue(rand.Reader, pki.Request{Identity: ident, Now: time.Now(), Validity: 24 * time.Hour})
	if err == nil {
		_, _, err = pki.WriteIssued(s.dir, is)
	}
	if err != nil {
		if _, lerr := transport.LoadTLS(f); lerr == nil {
			return f // issued before: a node restarted
		}
		panic(fmt.Sprintf("issue %s: %v", ident, err))
	}
	return f
}

// NewHTTPClient is a client with options o, and the harness's certificate
// when the cluster runs TLS.
func (c *Cluster) NewHTTPClient(o transport.ClientOptions) *http.Client {
	if c.sec != nil {
		o.TLS = c.sec.tls
	}
	return transport.NewClient(o)
}

// ClientOptions are the options of a client.Client of this cluster: its CA
// and certificate when it runs TLS.
func (c *Cluster) ClientOptions() []client.Option {
	if c.sec == nil {
		return nil
	}
	return []client.Option{client.WithCACert(c.sec.harness.CA), client.WithClientCert(c.sec.harness.Cert, c.sec.harness.Key)}
}

// Secure reports whether the cluster runs TLS.
func (c *Cluster) Secure() bool { return c.sec != nil }
