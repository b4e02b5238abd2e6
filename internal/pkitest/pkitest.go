// Package pkitest writes a CA and certificates for tests and benchmark
// harnesses: the files a node's --tls-ca, --tls-cert and --tls-key name,
// issued by package pki exactly as `jobmaster tls` issues them.
package pkitest

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"time"

	"jobmaster/pki"
	"jobmaster/transport"
)

// CA is a CA written into a directory, which issues certificates into it.
type CA struct {
	Dir string
	CA  *pki.CA
}

// New creates a CA in dir. It panics on failure: there is no test to run
// without one.
func New(dir string) *CA {
	ca, err := pki.NewCA(rand.Reader, time.Now(), 24*time.Hour)
	if err != nil {
		panic(err)
	}
	if _, _, err := pki.WriteCA(dir, ca); err != nil {
		panic(err)
	}
	return &CA{Dir: dir, CA: ca}
}

// CAFile is the CA's certificate file.
func (c *CA) CAFile() string { return filepath.Join(c.Dir, pki.CAFile) }

// Files issues a certificate for role and id (once: a second call returns
// the same files) and returns the TLS files of its holder.
func (c *CA) Files(role pki.Role, id string) transport.TLSFiles {
	ident := pki.Identity{Role: role, NodeID: id}
	f := transport.TLSFiles{CA: c.CAFile(), Cert: filepath.Join(c.Dir, pki.CertFile(ident)), Key: filepath.Join(c.Dir, pki.KeyFile(ident))}
	is, err := c.CA.Issue(rand.Reader, pki.Request{Identity: ident, Now: time.Now(), Validity: time.Hour})
	if err != nil {
		panic(err)
	}
	if _, _, err := pki.WriteIssued(c.Dir, is); err != nil {
		if _, lerr := transport.LoadTLS(f); lerr == nil {
			return f // issued before
		}
		panic(fmt.Sprintf("issue %s: %v", ident, err))
	}
	return f
}

// Load is Files, loaded.
func (c *CA) Load(role pki.Role, id string) *transport.TLS {
	t, err := transport.LoadTLS(c.Files(role, id))
	if err != nil {
		panic(err)
	}
	return t
}
