package executor

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/internal/pkitest"
	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

func TestAuthorize(t *testing.T) {
	server := pki.Identity{Role: pki.Server, NodeID: "m1"}
	exec := pki.Identity{Role: pki.Executor, NodeID: "e2"}
	client := pki.Identity{Role: pki.Client, NodeID: "alice"}
	none := pki.Identity{}
	tests := []struct {
		path string
		peer pki.Identity
		has  bool
		ok   bool
	}{
		{wire.PathDeploy, server, true, true},
		{wire.PathDeploy, exec, true, false},
		{wire.PathDeploy, client, true, false},
		{wire.PathDeploy, none, false, false},
		{wire.PathCancel, server, true, true},
		{wire.PathCancel, exec, true, false},
		{wire.PathHeartbeat, server, true, true},
		{wire.PathHeartbeat, exec, true, false},
		{wire.PathRelease, server, true, true},
		{wire.PathRelease, exec, true, false},
		{wire.PathPartitionData, exec, true, true},
		{wire.PathPartitionData, server, true, false},
		{wire.PathPartitionData, client, true, false},
		{wire.PathPartitionData, none, false, false},
		{"/v1/internal/something-new", server, true, true},
		{"/v1/internal/something-new", exec, true, false},
		{"/v1/internal", exec, true, false},
		{"/v1/internal//deploy", exec, true, false},
		{"/v1/internal/x/../deploy", exec, true, false},
		{wire.PathExecutions, none, false, false},
		{wire.PathLogs, none, false, false},
		{wire.PathPartitions, none, false, false},
		{"/v1/jobs", none, false, false},
		{wire.PathExecutions, client, true, true},
		{wire.PathLogs, client, true, true},
		{wire.PathPartitions, server, true, true},
		{wire.PathExecutions, exec, true, true},
	}
	for _, tt := range tests {
		err := authorize(tt.path, tt.peer, tt.has)
		if tt.ok {
			assert.NoError(t, err, "%s by %v", tt.path, tt.peer)
		} else {
			assert.Error(t, err, "%s by %v", tt.path, tt.peer)
		}
	}
}

// tlsDo sends a request through hc and returns the status and body.
func tlsDo(t *testing.T, hc *http.Client, method, url string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func TestOnlyServersCommandAnExecutor(t *testing.T) {
	ca := pkitest.New(t.TempDir())
	e := startExecutor(t, Config{NodeID: "e1", TLS: ca.Files(pki.Executor, "e1")})
	clients := map[string]*http.Client{}
	for _, p := range []struct {
		name string
		role pki.Role
	}{{"server", pki.Server}, {"executor", pki.Executor}, {"client", pki.Client}, {"none", ""}} {
		var tl *transport.TLS
		if p.role == "" {
			var err error
			tl, err = transport.LoadTLS(transport.TLSFiles{CA: ca.CAFile()})
			require.NoError(t, err)
		} else {
			tl = ca.Load(p.role, "x"+p.name)
		}
		hc := transport.NewClient(transport.ClientOptions{TLS: tl})
		t.Cleanup(hc.CloseIdleConnections)
		clients[p.name] = hc
	}
	l := wire.Leader{Version: wire.Version, Token: 1, Node: "m1"}
	bodies := map[string]any{
		wire.PathDeploy:    wire.NewDeployRequest(l, []wire.Task{simTask("j", 0, time.Hour, 0)}),
		wire.PathCancel:    wire.CancelRequest{Leader: l, IDs: []string{"j/v/0/0"}},
		wire.PathHeartbeat: wire.HeartbeatRequest{Leader: l},
		wire.PathRelease:   wire.ReleaseRequest{Leader: l},
	}
	for _, path := range []string{wire.PathDeploy, wire.PathCancel, wire.PathHeartbeat, wire.PathRelease} {
		b, err := json.Marshal(bodies[path])
		require.NoError(t, err)
		for _, who := range []string{"executor", "client", "none"} {
			hc := clients[who]
			code, body := tlsDo(t, hc, http.MethodPost, transport.URL(hc, e.Addr(), path), b)
			assert.Equal(t, http.StatusForbidden, code, "%s by %s: %s", path, who, body)
		}
	}
	assert.Empty(t, e.executions().Executions, "no refused deploy ran")
	hc := clients["server"]
	code, body := tlsDo(t, hc, http.MethodPost, transport.URL(hc, e.Addr(), wire.PathDeploy), mustJSON(t, bodies[wire.PathDeploy]))
	require.Equal(t, http.StatusOK, code, "%s", body)
	code, body = tlsDo(t, hc, http.MethodPost, transport.URL(hc, e.Addr(), wire.PathHeartbeat), mustJSON(t, bodies[wire.PathHeartbeat]))
	require.Equal(t, http.StatusOK, code, "%s", body)

	// Partition fetches are executors' only (the endpoint comes with the
	// data plane: admitted, it is not found yet).
	code, _ = tlsDo(t, hc, http.MethodGet, transport.URL(hc, e.Addr(), wire.PathPartitionData+"?id=x"), nil)
	assert.Equal(t, http.StatusForbidden, code, "a master does not fetch partitions")
	ex := clients["executor"]
	code, _ = tlsDo(t, ex, http.MethodGet, transport.URL(ex, e.Addr(), wire.PathPartitionData+"?id=x"), nil)
	assert.NotEqual(t, http.StatusForbidden, code)

	// The public endpoints need a certificate of the cluster: a user's
	// client certificate will do, none will not.
	user := clients["client"]
	code, body = tlsDo(t, user, http.MethodGet, transport.URL(user, e.Addr(), wire.PathExecutions), nil)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(body), "j/v/0/0")
	for _, path := range []string{wire.PathExecutions, wire.PathLogs + "?id=j/v/0/0&stream=stdout", wire.PathPartitions} {
		anon := clients["none"]
		code, body = tlsDo(t, anon, http.MethodGet, transport.URL(anon, e.Addr(), path), nil)
		assert.Equal(t, http.StatusForbidden, code, "%s: %s", path, body)
		assert.Contains(t, string(body), "only peers with a certificate from the cluster's CA")
	}

	// Plain HTTP gets nothing.
	code, _ = tlsDo(t, httpClient, http.MethodGet, "http://"+e.Addr()+wire.PathExecutions, nil)
	assert.Equal(t, http.StatusBadRequest, code)
}

func TestRequireRole(t *testing.T) {
	ca := pkitest.New(t.TempDir())
	e := &Executor{tls: ca.Load(pki.Executor, "e1")}
	h := e.requireRole(pki.Executor, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	srv := transport.NewServer(h, transport.ServerOptions{TLS: e.tls})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = transport.Serve(srv, ln) }()
	defer srv.Close()
	for role, want := range map[pki.Role]int{pki.Executor: http.StatusTeapot, pki.Server: http.StatusForbidden, pki.Client: http.StatusForbidden} {
		hc := transport.NewClient(transport.ClientOptions{TLS: ca.Load(role, "n")})
		code, _ := tlsDo(t, hc, http.MethodGet, transport.URL(hc, ln.Addr().String(), "/x"), nil)
		hc.CloseIdleConnections()
		assert.Equal(t, want, code, role)
	}
	off := &Executor{}
	assert.NotNil(t, off.requireRole(pki.Executor, h), "without TLS the handler is served as it is")
}

func TestPushIsMutualTLS(t *testing.T) {
	ca := pkitest.New(t.TempDir())
	var mu sync.Mutex
	var seen []string
	master := transport.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := transport.PeerIdentity(r)
		var rep wire.Report
		_ = json.NewDecoder(r.Body).Decode(&rep)
		mu.Lock()
		seen = append(seen, id.String()+" for "+rep.Executor)
		mu.Unlock()
		ack := make([]string, 0, len(rep.Executions))
		for _, x := range rep.Executions {
			ack = append(ack, x.ExecutionID)
		}
		transport.Compact.WriteJSON(w, http.StatusOK, wire.UpdateResponse{Ack: ack})
	}), transport.ServerOptions{TLS: ca.Load(pki.Server, "m1")})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = transport.Serve(master, ln) }()
	defer master.Close()

	e := startExecutor(t, Config{NodeID: "e1", TLS: ca.Files(pki.Executor, "e1")})
	assert.Equal(t, "https", transport.Scheme(e.client))
	hc := transport.NewClient(transport.ClientOptions{TLS: ca.Load(pki.Server, "m1")})
	defer hc.CloseIdleConnections()
	l := wire.Leader{Version: wire.Version, Token: 1, Node: "m1", Addr: ln.Addr().String()}
	code, body := tlsDo(t, hc, http.MethodPost, transport.URL(hc, e.Addr(), wire.PathDeploy),
		mustJSON(t, wire.NewDeployRequest(l, []wire.Task{simTask("j", 0, 10*time.Millisecond, 0)})))
	require.Equal(t, http.StatusOK, code, "%s", body)
	waitFor(t, "the push of the task's end", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0
	})
	mu.Lock()
	assert.Equal(t, "executor e1 for e1", seen[0], "the master sees the executor's certificate")
	mu.Unlock()
}

func TestExecutorRefusesUnprotectedExposure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, err := New(Config{NodeID: "e1", DataDir: dir, HTTPAddr: "0.0.0.0:0", Runtime: RuntimeSim})
	require.Error(t, err)
	assert.NoDirExists(t, dir, "refused before it made its data directory")
	assert.Contains(t, err.Error(), "--insecure")
	assert.Contains(t, err.Error(), "without TLS (--tls-ca, --tls-cert, --tls-key) and a gossip key")
	_, err = New(Config{NodeID: "e1", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Runtime: RuntimeSim,
		TLS: transport.TLSFiles{CA: "ca.pem"}})
	assert.ErrorContains(t, err, "go together")
	ca := pkitest.New(t.TempDir())
	_, err = New(Config{NodeID: "e1", DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Runtime: RuntimeSim, TLS: ca.Files(pki.Server, "e1")})
	assert.ErrorContains(t, err, "is for server e1, but this node is executor e1")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
