package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"jobmaster/client"
	"jobmaster/membership"
	"jobmaster/pki"
	"jobmaster/transport"
)

// security is a secure cluster's credentials: a CA, the nodes'
// certificates issued as they are added, a certificate for the harness, a
// gossip keyring, all in one directory, and the secret of the management
// token the masters are bootstrapped with, which the harness's clients
// send with every request.
type security struct {
	dir     string
	ca      *pki.CA
	keyring string
	harness transport.TLSFiles
	tls     *transport.TLS // the harness's
	token   string
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
	var secret [16]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, err
	}
	s := &security{dir: dir, ca: ca, keyring: filepath.Join(dir, "gossip.keyring"), token: "bench-" + hex.EncodeToString(secret[:])}
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
// and management token when the cluster runs secure.
func (c *Cluster) NewHTTPClient(o transport.ClientOptions) *http.Client {
	if c.sec != nil {
		o.TLS, o.Token = c.sec.tls, c.sec.token
	}
	return transport.NewClient(o)
}

// ClientOptions are the options of a client.Client of this cluster: its CA,
// certificate and management token when it runs secure.
func (c *Cluster) ClientOptions() []client.Option {
	if c.sec == nil {
		return nil
	}
	return []client.Option{client.WithCACert(c.sec.harness.CA), client.WithClientCert(c.sec.harness.Cert, c.sec.harness.Key),
		client.WithToken(c.sec.token)}
}

// Secure reports whether the cluster runs secure (TLS and ACLs).
func (c *Cluster) Secure() bool { return c.sec != nil }

// bootstrapACL bootstraps a secure cluster's ACLs with the harness's
// management secret, repeating the request (safe: it names its secret)
// until a master answers it.
func (c *Cluster) bootstrapACL(ctx context.Context) error {
	body := []byte(`{"secret_id":"` + c.sec.token + `"}`)
	for {
		var last error
		for _, m := range c.Masters {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL(m.HTTPAddr, "/v1/acl/bootstrap"), bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := c.HTTP.Do(req)
			if err != nil {
				last = err
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusCreated {
				return nil
			}
			last = fmt.Errorf("POST /v1/acl/bootstrap: %s", resp.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ACL bootstrap: %w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
