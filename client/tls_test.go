package client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/internal/pkitest"
	"jobmaster/pki"
	"jobmaster/transport"
)

// tlsMaster serves /v1/health over HTTPS and says, as its node, who the
// client's certificate names ("-" for none).
func tlsMaster(t *testing.T, ca *pkitest.CA) string {
	t.Helper()
	srv := transport.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := "-"
		if id, ok := transport.PeerIdentity(r); ok {
			who = id.String()
		}
		leader := "m1"
		transport.Indented.WriteJSON(w, http.StatusOK, api.Health{Leader: &leader, Node: who})
	}), transport.ServerOptions{TLS: ca.Load(pki.Server, "m1")})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = transport.Serve(srv, ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func TestClientOverTLS(t *testing.T) {
	ca := pkitest.New(t.TempDir())
	addr := tlsMaster(t, ca)
	ctx := context.Background()

	c, err := New(addr, WithCACert(ca.CAFile()))
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, []string{"https://" + addr}, c.Addresses(), "with a CA, host:port means https")
	h, err := c.Health(ctx, addr)
	require.NoError(t, err)
	assert.Equal(t, "-", h.Node, "no client certificate was presented")

	f := ca.Files(pki.Client, "alice")
	c2, err := New("https://"+addr, WithCACert(f.CA), WithClientCert(f.Cert, f.Key))
	require.NoError(t, err)
	defer c2.Close()
	h, err = c2.Health(ctx, addr)
	require.NoError(t, err)
	assert.Equal(t, "client alice", h.Node)

	plain, err := New(addr, WithTimeout(0))
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.Health(ctx, addr)
	require.Error(t, err, "plain HTTP to an HTTPS master")
	assert.Contains(t, err.Error(), "400")

	system, err := New("https://"+addr, WithTimeout(0))
	require.NoError(t, err)
	defer system.Close()
	_, err = system.Health(ctx, "https://"+addr)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "certificate"), "the system's roots do not know the cluster's CA: %v", err)

	_, err = New(addr, WithCACert(ca.CAFile()+".missing"))
	assert.Error(t, err)
}

// A certificate this client does not trust, or a master that refuses this
// client's certificate, fails at once: no round of retries can fix it.
func TestUntrustedMastersFailWithoutRetrying(t *testing.T) {
	ca, other := pkitest.New(t.TempDir()), pkitest.New(t.TempDir())
	addrs := tlsMaster(t, ca) + "," + tlsMaster(t, ca)
	retried := func(err *UnreachableError) { t.Errorf("retried after %v", err) }

	c, err := New(addrs, WithCACert(other.CAFile()), WithTimeout(0), WithRetryNotify(retried))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Jobs(context.Background())
	u, ok := errors.AsType[*UnreachableError](err)
	require.True(t, ok, "%v", err)
	assert.True(t, u.Untrusted(), "%v", err)
	assert.Len(t, u.Attempts, 2, "each master was tried once")
	assert.False(t, RefusedCertificate(u.Attempts[0].Err))

	// A master that requires a client certificate, which this client lacks.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", ca.Load(pki.Server, "m1").ServerConfig(true, nil))
	require.NoError(t, err)
	srv := &http.Server{Handler: http.NotFoundHandler(), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c2, err := New(ln.Addr().String(), WithCACert(ca.CAFile()), WithTimeout(0), WithRetryNotify(retried))
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.Jobs(context.Background())
	u, ok = errors.AsType[*UnreachableError](err)
	require.True(t, ok, "%v", err)
	assert.True(t, u.Untrusted(), "%v", err)
	assert.True(t, RefusedCertificate(u.Attempts[0].Err), "%v", err)
	assert.True(t, u.RefusedCertificate(), "%v", err)

	// One master down (its port refuses connections), the others
	// untrusted: waiting for the one that is down changes nothing.
	c3, err := New(deadAddr(t)+","+addrs, WithCACert(other.CAFile()), WithTimeout(0), WithRetryNotify(retried))
	require.NoError(t, err)
	defer c3.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a retrying client fails, not hangs
	defer cancel()
	_, err = c3.Jobs(ctx)
	u, ok = errors.AsType[*UnreachableError](err)
	require.True(t, ok, "%v", err)
	assert.True(t, u.Untrusted(), "%v", err)
	assert.False(t, u.RefusedCertificate(), "%v", err)
	assert.Len(t, u.Attempts, 3, "each master was tried once")
}
