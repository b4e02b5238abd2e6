package master

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/fsm"
	"jobmaster/internal/pkitest"
	"jobmaster/membership"
	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// tlsCluster is a testCluster with TLS, a gossip key and ACLs on every
// master; its clients carry the management token it bootstrapped.
type tlsCluster struct {
	*testCluster
	ca    *pkitest.CA
	key   string
	token string
}

func newTLSCluster(t *testing.T, n int) *tlsCluster {
	ca := pkitest.New(t.TempDir())
	key, err := membership.NewKey()
	require.NoError(t, err)
	c := newTestCluster(t, n, func(cfg *Config) {
		cfg.TLS = ca.Files(pki.Server, cfg.NodeID)
		cfg.GossipKeys = []string{key}
		cfg.ACL = true
	})
	tc := &tlsCluster{testCluster: c, ca: ca, key: key, token: "management-secret-of-the-test"}
	tc.bootstrap()
	return tc
}

// bootstrap waits for a leader and bootstraps the ACLs with the cluster's
// management secret.
func (c *tlsCluster) bootstrap() {
	c.t.Helper()
	l := c.leader()
	hc := c.client("", "")
	r := doWith(c.t, hc, http.MethodPost, transport.URL(hc, c.masters[l].HTTPAddr(), "/v1/acl/bootstrap"),
		[]byte(`{"secret_id": "`+c.token+`"}`))
	require.Equal(c.t, http.StatusCreated, r.status, "%s", r.body)
	// Every master knows the token before a test uses it: a follower
	// refuses a token it does not know on a route it serves itself.
	c.waitTokenEverywhere()
}

// waitTokenEverywhere waits until every master's state holds the
// cluster's management token.
func (c *tlsCluster) waitTokenEverywhere() {
	c.t.Helper()
	waitFor(c.t, "the management token on every master", func() bool {
		for _, m := range c.masters {
			if m != nil {
				if _, ok := m.lookupToken(secretHash(c.token)); !ok {
					return false
				}
			}
		}
		return true
	})
}

// client is an HTTP client holding the certificate of role and id; an
// empty role holds none (a user's).
func (c *tlsCluster) client(role pki.Role, id string) *http.Client {
	c.t.Helper()
	var tl *transport.TLS
	if role == "" {
		var err error
		tl, err = transport.LoadTLS(transport.TLSFiles{CA: c.ca.CAFile()})
		require.NoError(c.t, err)
	} else {
		tl = c.ca.Load(role, id)
	}
	hc := transport.NewClient(transport.ClientOptions{TLS: tl, Token: c.token})
	c.t.Cleanup(hc.CloseIdleConnections)
	return hc
}

func doWith(t *testing.T, hc *http.Client, method, url string, body []byte) httpResult {
	t.Helper()
	return doTypeWith(t, hc, method, url, "application/json", body)
}

// doTypeWith is doWith with a body of another media type.
func doTypeWith(t *testing.T, hc *http.Client, method, url, contentType string, body []byte) httpResult {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return httpResult{status: resp.StatusCode, body: b, header: resp.Header}
}

func TestTLSClusterFormsAndForwards(t *testing.T) {
	c := newTLSCluster(t, 3)
	l := c.leader()
	f := c.follower()
	user := c.client("", "")
	url := func(i int, path string) string { return transport.URL(user, c.masters[i].HTTPAddr(), path) }
	require.True(t, strings.HasPrefix(url(f, "/"), "https://"))

	r := doWith(t, user, http.MethodPut, url(f, "/v1/jobs/tls-1"), []byte(simpleJob))
	requireAccepted(t, r) // forwarded by the follower to the leader, over mutual TLS
	r = doWith(t, user, http.MethodGet, url(f, "/v1/cluster"), nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var cl struct {
		Leader  *string `json:"leader"`
		Masters []struct{ ID string }
	}
	require.NoError(t, json.Unmarshal(r.body, &cl))
	require.NotNil(t, cl.Leader)
	assert.Equal(t, c.masters[l].ID(), *cl.Leader)
	assert.Len(t, cl.Masters, 3)
	peers := c.masters[l].Raft().GetConfiguration()
	require.NoError(t, peers.Error())
	assert.Len(t, peers.Configuration().Servers, 3, "every master was verified and bootstrapped")

	// Its certificate's time left is a metric.
	r = doWith(t, user, http.MethodGet, url(f, "/v1/metrics"), nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Regexp(t, `(?m)^jobmaster_tls_cert_expiry_seconds [0-9.e+]+$`, string(r.body))

	// Plain HTTP to the HTTPS port gets nothing.
	plain := transport.NewClient(transport.ClientOptions{})
	r = doWith(t, plain, http.MethodGet, transport.URL(plain, c.masters[f].HTTPAddr(), "/v1/jobs"), nil)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Contains(t, string(r.body), "HTTP request to an HTTPS server")
}

func TestPushNeedsTheExecutorsCertificate(t *testing.T) {
	c := newTLSCluster(t, 3)
	l, f := c.leader(), c.follower()
	report := wire.Report{Version: wire.Version, Executor: "e2", Instance: "x"}
	rep, err := json.Marshal(report)
	require.NoError(t, err)
	bin := wire.AppendReport(nil, &report)
	for _, tt := range []struct {
		name      string
		role      pki.Role
		id        string
		forbidden bool
	}{
		{"no certificate", "", "", true},
		{"a client's", pki.Client, "alice", true},
		{"another executor's", pki.Executor, "e1", true},
		{"its own", pki.Executor, "e2", false},
		{"a master relaying it", pki.Server, "m9", false},
	} {
		hc := c.client(tt.role, tt.id)
		for _, i := range []int{l, f} {
			url := transport.URL(hc, c.masters[i].HTTPAddr(), wire.PathExecutorUpdate)
			r := doWith(t, hc, http.MethodPost, url, rep)
			rb := doTypeWith(t, hc, http.MethodPost, url, wire.ReportType, bin)
			if tt.forbidden {
				assert.Equal(t, http.StatusForbidden, r.status, "%s on master %d: %s", tt.name, i, r.body)
				assert.Equal(t, http.StatusForbidden, rb.status, "%s on master %d, in binary: %s", tt.name, i, rb.body)
			} else {
				assert.Equal(t, http.StatusOK, r.status, "%s on master %d: %s", tt.name, i, r.body)
				assert.Equal(t, http.StatusOK, rb.status, "%s on master %d, in binary: %s", tt.name, i, rb.body)
			}
		}
	}
}

func TestRaftAdmitsServersOnly(t *testing.T) {
	c := newTLSCluster(t, 3)
	l := c.leader()
	addr := c.masters[l].rp.advertise
	try := func(role pki.Role, id string) error {
		conf := &tls.Config{ServerName: "127.0.0.1", RootCAs: pool(t, c.ca.CAFile())}
		if role != "" {
			f := c.ca.Files(role, id)
			cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
			require.NoError(t, err)
			conf.Certificates = []tls.Certificate{cert}
		}
		conn, err := tls.Dial("tcp", addr, conf)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		// Any byte makes the server read, and a refused handshake comes
		// back as an alert; an admitted peer is left waiting for the rest
		// of a Raft command.
		if _, err := conn.Write([]byte{0}); err != nil {
			return err
		}
		_, err = conn.Read(make([]byte, 1))
		return err
	}
	for _, role := range []pki.Role{pki.Executor, pki.Client, ""} {
		err := try(role, "intruder")
		require.Error(t, err, "a %q certificate", role)
		assert.NotErrorIs(t, err, io.EOF, "refused by the handshake, not by Raft: %v", err)
	}
	err := try(pki.Server, "m7")
	var ne net.Error
	require.ErrorAs(t, err, &ne, "a server's certificate is admitted")
	assert.True(t, ne.Timeout(), "%v", err)

	// A master whose certificate is another's does not start.
	cfg := c.cfgs[0]
	cfg.NodeID, cfg.DataDir = "m4", t.TempDir()
	cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr = freeAddr(t), freeAddr(t), freeAddr(t)
	_, err = New(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is for server m1, but this node is server m4")
	cfg.TLS = c.ca.Files(pki.Executor, "m4")
	_, err = New(cfg)
	assert.ErrorContains(t, err, "is for executor m4, but this node is server m4")
}

func pool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	p := x509.NewCertPool()
	require.True(t, p.AppendCertsFromPEM(b))
	return p
}

func TestGossipAloneMakesNoVoter(t *testing.T) {
	c := newTLSCluster(t, 3)
	l := c.leader()
	// An impostor knows the gossip key and announces itself as a master,
	// with a Raft address that presents an executor's certificate (one
	// stolen from an executor, say).
	fake := c.ca.Load(pki.Executor, "m4")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", fake.ServerConfig(false, nil))
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.(*tls.Conn).Handshake()
			}()
		}
	}()
	keys, err := membership.LoadKeys([]string{c.key}, "")
	require.NoError(t, err)
	g, err := membership.Start(membership.Config{NodeID: "m4", BindAddr: freeAddr(t), Join: c.cfgs[0].Join, Keys: keys,
		Meta: membership.Meta{Role: membership.RoleMaster, HTTPAddr: "127.0.0.1:1", RaftAddr: ln.Addr().String(), Version: wire.Version}})
	require.NoError(t, err)
	defer g.Shutdown()
	waitFor(t, "the leader to see the impostor in gossip", func() bool {
		mem, ok := c.masters[l].gossip.Get("m4")
		return ok && mem.Status == membership.StatusAlive
	})
	// The voter reconciler runs on every gossip change and every second.
	time.Sleep(3 * time.Second)
	cfg := c.masters[l].Raft().GetConfiguration()
	require.NoError(t, cfg.Error())
	for _, s := range cfg.Configuration().Servers {
		assert.NotEqual(t, raft.ServerID("m4"), s.ID, "the impostor became a Raft server")
	}
	assert.Len(t, cfg.Configuration().Servers, 3)

	// What the reconciler asked, directly: m2's address vouches for m2
	// only; the impostor's for nobody; a plain listener for nobody.
	m := c.masters[l]
	other := (l + 1) % 3
	addr := raft.ServerAddress(c.masters[other].rp.advertise)
	require.NoError(t, m.verifyServer(raft.ServerID(c.masters[other].ID()), addr))
	err = m.verifyServer("m9", addr)
	assert.ErrorContains(t, err, "presents the certificate of server "+c.masters[other].ID()+", not of server m9")
	err = m.verifyServer("m4", raft.ServerAddress(ln.Addr().String()))
	assert.ErrorContains(t, err, "presents the certificate of executor m4, not of server m4")
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer plain.Close()
	go func() {
		conn, err := plain.Accept()
		if err == nil {
			_, _ = conn.Write([]byte("not TLS\n"))
			conn.Close()
		}
	}()
	assert.Error(t, m.verifyServer("m5", raft.ServerAddress(plain.Addr().String())))
}

func TestAuthorizePush(t *testing.T) {
	id := func(r pki.Role, n string) pki.Identity { return pki.Identity{Role: r, NodeID: n} }
	tests := []struct {
		name     string
		peer     pki.Identity
		has      bool
		executor string
		ok       bool
	}{
		{"its own certificate", id(pki.Executor, "e1"), true, "e1", true},
		{"a master relaying", id(pki.Server, "m2"), true, "e1", true},
		{"another executor", id(pki.Executor, "e1"), true, "e2", false},
		{"an empty report", id(pki.Executor, "e1"), true, "", false},
		{"a client", id(pki.Client, "e1"), true, "e1", false},
		{"no certificate", pki.Identity{}, false, "e1", false},
	}
	for _, tt := range tests {
		err := authorizePush(tt.peer, tt.has, tt.executor)
		if tt.ok {
			assert.NoError(t, err, tt.name)
		} else {
			assert.ErrorIs(t, err, errForbidden, tt.name)
		}
	}
	assert.NoError(t, admitVoter("m1", id(pki.Server, "m1")))
	assert.Error(t, admitVoter("m1", id(pki.Server, "m2")))
	assert.Error(t, admitVoter("m1", id(pki.Executor, "m1")))
	assert.Error(t, admitVoter("m1", id(pki.Client, "m1")))
}

func TestRefusesToListenBeyondLoopbackUnprotected(t *testing.T) {
	cfg := Config{NodeID: "m1", DataDir: t.TempDir(), HTTPAddr: "0.0.0.0:0", RaftAddr: freeAddr(t), GossipAddr: freeAddr(t)}
	_, err := New(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--insecure")
	assert.Contains(t, err.Error(), "--http-addr 0.0.0.0:0")
	assert.Contains(t, err.Error(), "without TLS (--tls-ca, --tls-cert, --tls-key), a gossip key (--gossip-key or --gossip-keyring) and ACLs (--acl)")
	cfg.GossipKeys = []string{"short"}
	_, err = New(cfg)
	assert.ErrorContains(t, err, "--gossip-key", "a bad key is refused before anything else")
}

// With TLS, a master takes the word about a token only of the master Raft
// names leader, by its server certificate: not of whoever answers at the
// address gossip gave.
func TestATokenIsVouchedForOnlyByTheLeadersCertificate(t *testing.T) {
	c := newTLSCluster(t, 3)
	l, f := c.leader(), c.follower()
	ask := func(id string) bool {
		behind := &Master{cfg: Config{ACL: true}, log: slog.New(slog.DiscardHandler), fsm: fsm.New(),
			client: c.masters[f].client, tls: c.masters[f].tls, tokenAsks: make(chan struct{}, maxTokenAsks),
			leaderForTokens: func() (string, string) { return c.masters[l].HTTPAddr(), id }}
		_, _, ok, _ := behind.tokenFromLeader(context.Background(), secretHash(c.token))
		return ok
	}
	require.True(t, ask(c.masters[l].ID()), "the leader's answer")
	other := c.masters[(l+1)%3].ID()
	require.False(t, ask(other), "an answer from the leader's address, in another's name than %s", other)
}
