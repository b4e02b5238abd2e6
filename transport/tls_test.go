package transport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/internal/pkitest"
	"jobmaster/pki"
	"jobmaster/transport"
)

// serveTLS serves an HTTPS endpoint with srvTLS that answers with the
// identity of the peer's certificate ("-" for none), and returns its
// address and how many requests reached the handler.
func serveTLS(t *testing.T, srvTLS *transport.TLS, host string) (string, *atomic.Int32) {
	t.Helper()
	var served atomic.Int32
	srv := transport.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		id, ok := transport.PeerIdentity(r)
		who := "-"
		if ok {
			who = id.String()
		}
		_, _ = io.WriteString(w, who)
	}), transport.ServerOptions{TLS: srvTLS})
	require.NotNil(t, srv.TLSConfig)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	go func() { _ = transport.Serve(srv, ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), &served
}

func get(c *http.Client, addr string) (string, error) {
	resp, err := c.Get(transport.URL(c, addr, "/"))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status + ": " + strings.TrimSpace(string(b)))
	}
	return string(b), err
}

func TestMutualTLS(t *testing.T) {
	ca := pkitest.New(t.TempDir())
	addr, served := serveTLS(t, ca.Load(pki.Server, "m1"), "127.0.0.1")

	e1 := transport.NewClient(transport.ClientOptions{TLS: ca.Load(pki.Executor, "e1"), PeerCheck: transport.NodePeer})
	assert.Equal(t, "https", transport.Scheme(e1))
	who, err := get(e1, addr)
	require.NoError(t, err)
	assert.Equal(t, "executor e1", who, "the server sees the client's certificate")

	user, err := transport.LoadTLS(transport.TLSFiles{CA: ca.CAFile()})
	require.NoError(t, err)
	_, hasID := user.Identity()
	assert.False(t, hasID)
	who, err = get(transport.NewClient(transport.ClientOptions{TLS: user}), addr)
	require.NoError(t, err)
	assert.Equal(t, "-", who, "a client without a certificate is admitted; handlers decide")

	who, err = get(transport.NewClient(transport.ClientOptions{TLS: ca.Load(pki.Client, "alice")}), "localhost:"+port(addr))
	require.NoError(t, err, "every certificate covers localhost")
	assert.Equal(t, "client alice", who)

	n := served.Load()
	_, err = get(transport.NewClient(transport.ClientOptions{}), addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "400", "plain HTTP to a TLS port is answered 400")
	assert.Equal(t, n, served.Load(), "and reaches no handler")
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func TestTLSRefusals(t *testing.T) {
	ca := pkitest.New(t.TempDir())
	other := pkitest.New(t.TempDir())
	addr, served := serveTLS(t, ca.Load(pki.Server, "m1"), "127.0.0.1")

	// A certificate from another CA is no identity: a client that has one
	// sends it only to a server that names its CA, and a server refuses
	// one sent anyway.
	_, err := transport.LoadTLS(transport.TLSFiles{CA: ca.CAFile(), Cert: other.Files(pki.Executor, "e1").Cert, Key: other.Files(pki.Executor, "e1").Key})
	require.Error(t, err, "a node's own certificate must come from the CA it trusts")
	assert.Contains(t, err.Error(), "not vouched for")
	bundle := filepath.Join(t.TempDir(), "both.pem")
	writeBundle(t, bundle, ca.CAFile(), other.CAFile())
	stranger, err := transport.LoadTLS(transport.TLSFiles{CA: bundle, Cert: other.Files(pki.Executor, "e1").Cert, Key: other.Files(pki.Executor, "e1").Key})
	require.NoError(t, err)
	who, err := get(transport.NewClient(transport.ClientOptions{TLS: stranger}), addr)
	require.NoError(t, err)
	assert.Equal(t, "-", who)
	foreign, err := tls.LoadX509KeyPair(other.Files(pki.Executor, "e1").Cert, other.Files(pki.Executor, "e1").Key)
	require.NoError(t, err)
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "127.0.0.1", RootCAs: caPool(t, ca.CAFile()),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign, nil }})
	if err == nil {
		_, err = conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		if err == nil {
			_, err = io.ReadAll(conn)
		}
		conn.Close()
	}
	require.Error(t, err, "the server verifies a certificate it is given")

	// A client that trusts another CA refuses the server.
	_, err = get(transport.NewClient(transport.ClientOptions{TLS: other.Load(pki.Executor, "e2")}), addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")

	// The server's certificate must cover the host dialed: 127.0.0.2 is
	// loopback too, but not in the certificate.
	addr2, _ := serveTLS(t, ca.Load(pki.Server, "m2"), "127.0.0.2")
	_, err = get(transport.NewClient(transport.ClientOptions{TLS: ca.Load(pki.Executor, "e1")}), addr2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "127.0.0.2")

	// A peer check refuses a role: a client that wants servers only does
	// not talk to an executor.
	addr3, _ := serveTLS(t, ca.Load(pki.Executor, "e9"), "127.0.0.1")
	_, err = get(transport.NewClient(transport.ClientOptions{TLS: ca.Load(pki.Server, "m1"), PeerCheck: transport.ServerOnly}), addr3)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want a server's")
	assert.EqualValues(t, 1, served.Load(), "only the stranger without an identity reached a handler")
}

func TestRequiredPeerCertificate(t *testing.T) {
	ca := pkitest.New(t.TempDir())
	srvTLS := ca.Load(pki.Server, "m1")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS.ServerConfig(true, transport.ServerOnly))
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c) // an echo, once the handshake is through
			}()
		}
	}()
	try := func(tl *transport.TLS) error {
		c, err := tl.DialTLS(context.Background(), &net.Dialer{}, ln.Addr().String(), transport.ServerOnly)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_, err = io.ReadFull(c, make([]byte, 1)) // TLS 1.3: the server's verdict arrives with the first read
		return err
	}
	require.NoError(t, try(ca.Load(pki.Server, "m2")))
	err = try(ca.Load(pki.Executor, "e1"))
	require.Error(t, err, "an executor's certificate is refused where servers only are admitted")
	user, err := transport.LoadTLS(transport.TLSFiles{CA: ca.CAFile()})
	require.NoError(t, err)
	require.Error(t, try(user), "no certificate, no connection")
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca := pkitest.New(filepath.Join(dir, "old"))
	next := pkitest.New(filepath.Join(dir, "new"))
	// The server's files are copies that the test replaces, as an operator
	// would.
	srvFiles := transport.TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "m1.pem"), Key: filepath.Join(dir, "m1-key.pem")}
	install := func(from transport.TLSFiles, caFiles ...string) {
		writeBundle(t, srvFiles.CA, caFiles...)
		copyFile(t, from.Cert, srvFiles.Cert)
		copyFile(t, from.Key, srvFiles.Key)
	}
	install(ca.Files(pki.Server, "m1"), ca.CAFile())
	srvTLS, err := transport.LoadTLS(srvFiles)
	require.NoError(t, err)
	addr, _ := serveTLS(t, srvTLS, "127.0.0.1")

	oldClient := func() *http.Client {
		return transport.NewClient(transport.ClientOptions{TLS: ca.Load(pki.Executor, "e1")})
	}
	_, err = get(oldClient(), addr)
	require.NoError(t, err)

	// Step 1: trust both CAs. Step 2: a certificate from the new CA.
	install(ca.Files(pki.Server, "m1"), ca.CAFile(), next.CAFile())
	require.NoError(t, srvTLS.Reload())
	install(next.Files(pki.Server, "m1"), ca.CAFile(), next.CAFile())
	require.NoError(t, srvTLS.Reload())
	_, err = get(oldClient(), addr)
	require.Error(t, err, "a client that trusts only the old CA refuses the new certificate")
	who, err := get(transport.NewClient(transport.ClientOptions{TLS: next.Load(pki.Executor, "e2")}), addr)
	require.NoError(t, err)
	assert.Equal(t, "executor e2", who)

	// A client's pool reloads as well: trusting both CAs again, the old
	// executor's client reaches the server.
	cliFiles := transport.TLSFiles{CA: filepath.Join(dir, "cli-ca.pem"), Cert: ca.Files(pki.Executor, "e1").Cert, Key: ca.Files(pki.Executor, "e1").Key}
	writeBundle(t, cliFiles.CA, ca.CAFile())
	cliTLS, err := transport.LoadTLS(cliFiles)
	require.NoError(t, err)
	cli := transport.NewClient(transport.ClientOptions{TLS: cliTLS})
	_, err = get(cli, addr)
	require.Error(t, err)
	writeBundle(t, cliFiles.CA, ca.CAFile(), next.CAFile())
	require.NoError(t, cliTLS.Reload())
	who, err = get(cli, addr)
	require.NoError(t, err)
	assert.Equal(t, "executor e1", who)

	// A reload that would change the node's identity, or that reads broken
	// files, changes nothing.
	install(next.Files(pki.Server, "m2"), next.CAFile())
	err = srvTLS.Reload()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is now for server m2, but this node is server m1")
	require.NoError(t, os.WriteFile(srvFiles.Key, []byte("junk"), 0o600))
	require.Error(t, srvTLS.Reload())
	id, _ := srvTLS.Identity()
	assert.Equal(t, pki.Identity{Role: pki.Server, NodeID: "m1"}, id)
	who, err = get(transport.NewClient(transport.ClientOptions{TLS: next.Load(pki.Executor, "e2")}), addr)
	require.NoError(t, err, "the server goes on with what it had")
	assert.Equal(t, "executor e2", who)
}

func TestLoadTLSRefuses(t *testing.T) {
	ca := pkitest.New(t.TempDir())
	f := ca.Files(pki.Server, "m1")
	for name, files := range map[string]transport.TLSFiles{
		"cert without key": {CA: f.CA, Cert: f.Cert},
		"missing CA file":  {CA: f.CA + ".missing", Cert: f.Cert, Key: f.Key},
		"CA not PEM":       {CA: f.Key + "x", Cert: f.Cert, Key: f.Key},
		"key of another":   {CA: f.CA, Cert: f.Cert, Key: ca.Files(pki.Server, "m2").Key},
	} {
		_, err := transport.LoadTLS(files)
		assert.Error(t, err, name)
	}
	assert.Error(t, transport.TLSFiles{CA: "a", Cert: "b"}.CheckNode())
	assert.NoError(t, f.CheckNode())
	assert.False(t, transport.TLSFiles{}.On())
}

func caPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	p := x509.NewCertPool()
	require.True(t, p.AppendCertsFromPEM(b))
	return p
}

func writeBundle(t *testing.T, path string, files ...string) {
	t.Helper()
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		all = append(all, b...)
	}
	require.NoError(t, os.WriteFile(path, all, 0o644))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o600))
}

// A peer that proves a node's identity is not held to the per-client
// bound (an executor follows a pipelined source per connection); a client
// certificate, or none, is.
func TestNodesAreNotBoundedPerClient(t *testing.T) {
	ca := pkitest.New(t.TempDir())
	srv := transport.NewServerSeenFrom(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), transport.ServerOptions{TLS: ca.Load(pki.Executor, "e1"), MaxConnsPerClient: 2}, "192.0.2.7")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = transport.Serve(srv, ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	// open dials a connection of its own with material tl and makes one
	// request over it, which it keeps open.
	open := func(tl *transport.TLS) error {
		c, err := tl.DialTLS(context.Background(), &net.Dialer{}, ln.Addr().String(), nil)
		if err != nil {
			return err
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		buf := make([]byte, 12)
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != "HTTP/1.1 200" {
			return errors.New(string(buf))
		}
		return nil
	}
	e2 := ca.Load(pki.Executor, "e2")
	for i := range 6 {
		require.NoError(t, open(e2), "an executor's connection %d", i+1)
	}
	alice := ca.Load(pki.Client, "alice")
	require.NoError(t, open(alice))
	require.NoError(t, open(alice))
	require.Error(t, open(alice), "a client's third connection is refused")
}
