package pki

import (
	"crypto/rand"
	"crypto/x509"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA(rand.Reader, now, DefaultCAValidity)
	require.NoError(t, err)
	return ca
}

func issue(t *testing.T, ca *CA, role Role, id string) *Issued {
	t.Helper()
	is, err := ca.Issue(rand.Reader, Request{Identity: Identity{Role: role, NodeID: id}, Now: now, Validity: DefaultCertValidity,
		IPs: []net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("127.0.0.1")}, DNS: []string{"m1.example", "localhost"}})
	require.NoError(t, err)
	return is
}

func TestIssueVerifiesAgainstItsCA(t *testing.T) {
	ca := newCA(t)
	assert.True(t, ca.Cert.IsCA)
	assert.Contains(t, ca.Cert.Subject.CommonName, "jobmaster CA ")
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)

	srv := issue(t, ca, Server, "m1")
	assert.ElementsMatch(t, []string{"localhost", "m1.example"}, srv.Cert.DNSNames, "localhost always, once")
	var ips []string
	for _, ip := range srv.Cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	assert.ElementsMatch(t, []string{"127.0.0.1", "::1", "10.0.0.1"}, ips)
	at := now.Add(time.Hour)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err := srv.Cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: "127.0.0.1"})
		assert.NoError(t, err, "a server certificate serves and dials TLS (usage %v)", usage)
	}

	cl := issue(t, ca, Client, "alice")
	_, err := cl.Cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err)
	_, err = cl.Cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	assert.Error(t, err, "a client certificate cannot serve TLS: it cannot pose as a node")

	other := newCA(t)
	otherPool := x509.NewCertPool()
	otherPool.AddCert(other.Cert)
	_, err = srv.Cert.Verify(x509.VerifyOptions{Roots: otherPool, CurrentTime: at})
	assert.Error(t, err, "another CA does not vouch for it")
	assert.NotEqual(t, ca.Cert.Subject.CommonName, other.Cert.Subject.CommonName, "two CAs are told apart by name")
}

func TestIssueRefuses(t *testing.T) {
	ca := newCA(t)
	for name, r := range map[string]Request{
		"unknown role":      {Identity: Identity{Role: "admin", NodeID: "x"}, Now: now, Validity: time.Hour},
		"empty node id":     {Identity: Identity{Role: Server}, Now: now, Validity: time.Hour},
		"bad node id":       {Identity: Identity{Role: Server, NodeID: "a/b"}, Now: now, Validity: time.Hour},
		"no validity":       {Identity: Identity{Role: Server, NodeID: "m1"}, Now: now},
		"outlives its CA":   {Identity: Identity{Role: Server, NodeID: "m1"}, Now: now, Validity: DefaultCAValidity + time.Hour},
		"node id too weird": {Identity: Identity{Role: Executor, NodeID: ".."}, Now: now, Validity: time.Hour},
	} {
		_, err := ca.Issue(rand.Reader, r)
		assert.Error(t, err, name)
	}
	// What is left of the CA's life is said: a short-lived CA (the dev's)
	// cannot sign the default validity.
	short, err := NewCA(rand.Reader, now, 30*24*time.Hour)
	require.NoError(t, err)
	_, err = short.Issue(rand.Reader, Request{Identity: Identity{Role: Server, NodeID: "m4"}, Now: now.Add(24 * time.Hour), Validity: DefaultCertValidity})
	assert.ErrorContains(t, err, "issue it for at most 29 days")
	_, err = short.Issue(rand.Reader, Request{Identity: Identity{Role: Server, NodeID: "m4"}, Now: now.Add(30 * 24 * time.Hour), Validity: time.Hour})
	assert.ErrorContains(t, err, "less than a day from now): rotate the CA first")
}

func TestIdentityRoundTrip(t *testing.T) {
	ca := newCA(t)
	for _, role := range Roles {
		is := issue(t, ca, role, "node-1.a_b")
		got, err := IdentityOf(is.Cert)
		require.NoError(t, err)
		assert.Equal(t, Identity{Role: role, NodeID: "node-1.a_b"}, got)
		assert.Equal(t, "jobmaster://"+string(role)+"/node-1.a_b", is.Cert.URIs[0].String())
	}
}

func TestIdentityOf(t *testing.T) {
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		require.NoError(t, err)
		return v
	}
	tests := []struct {
		name    string
		uris    []*url.URL
		want    Identity
		wantErr string
	}{
		{"server", []*url.URL{u("jobmaster://server/m1")}, Identity{Server, "m1"}, ""},
		{"executor", []*url.URL{u("jobmaster://executor/e12")}, Identity{Executor, "e12"}, ""},
		{"client", []*url.URL{u("jobmaster://client/alice")}, Identity{Client, "alice"}, ""},
		{"other URIs ignored", []*url.URL{u("spiffe://x/y"), u("jobmaster://server/m1")}, Identity{Server, "m1"}, ""},
		{"none", nil, Identity{}, "carries no jobmaster identity"},
		{"only others", []*url.URL{u("https://m1.example/")}, Identity{}, "carries no jobmaster identity"},
		{"two", []*url.URL{u("jobmaster://server/m1"), u("jobmaster://executor/m1")}, Identity{}, "2 jobmaster identities"},
		{"unknown role", []*url.URL{u("jobmaster://root/m1")}, Identity{}, `role "root"`},
		{"no node id", []*url.URL{u("jobmaster://server/")}, Identity{}, "must not be empty"},
		{"no path", []*url.URL{u("jobmaster://server")}, Identity{}, "want jobmaster://<role>/<node id>"},
		{"nested path", []*url.URL{u("jobmaster://server/m1/x")}, Identity{}, "character '/'"},
		{"query", []*url.URL{u("jobmaster://server/m1?x=1")}, Identity{}, "want jobmaster://<role>/<node id>"},
		{"user", []*url.URL{u("jobmaster://u@server/m1")}, Identity{}, "want jobmaster://<role>/<node id>"},
		{"role in the port", []*url.URL{u("jobmaster://server:1/m1")}, Identity{}, `role "server:1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IdentityOf(&x509.Certificate{URIs: tt.uris})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	ca := newCA(t)
	certPath, keyPath, err := WriteCA(dir, ca)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "ca.pem"), certPath)
	assert.Equal(t, filepath.Join(dir, "ca-key.pem"), keyPath)
	mode(t, keyPath, 0o600)
	mode(t, certPath, 0o644)
	_, _, err = WriteCA(dir, ca)
	assert.ErrorContains(t, err, "exists", "a CA is never overwritten")

	back, err := LoadCA(dir)
	require.NoError(t, err)
	assert.True(t, back.Cert.Equal(ca.Cert))
	assert.True(t, back.Key.Equal(ca.Key))

	is := issue(t, back, Executor, "e1")
	certPath, keyPath, err = WriteIssued(dir, is)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "executor-e1.pem"), certPath)
	assert.Equal(t, filepath.Join(dir, "executor-e1-key.pem"), keyPath)
	mode(t, keyPath, 0o600)
	_, _, err = WriteIssued(dir, is)
	assert.ErrorContains(t, err, "exists")

	b, err := os.ReadFile(certPath)
	require.NoError(t, err)
	certs, err := ParseCerts(b)
	require.NoError(t, err)
	id, err := IdentityOf(certs[0])
	require.NoError(t, err)
	assert.Equal(t, Identity{Executor, "e1"}, id)

	// A CA directory whose key is another CA's is refused.
	other := newCA(t)
	odir := t.TempDir()
	_, _, err = WriteCA(odir, other)
	require.NoError(t, err)
	key, err := os.ReadFile(filepath.Join(odir, CAKeyFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, CAKeyFile), key, 0o600))
	_, err = LoadCA(dir)
	assert.ErrorContains(t, err, "is not the key of")
	// A leaf is not a CA.
	require.NoError(t, os.WriteFile(filepath.Join(odir, CAFile), is.CertPEM, 0o644))
	_, err = LoadCA(odir)
	assert.ErrorContains(t, err, "not a CA certificate")
}

func mode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, want, st.Mode().Perm(), path)
}
