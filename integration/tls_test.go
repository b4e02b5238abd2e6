package integration

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/launch"
	"jobmaster/membership"
	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// A secure cluster (TLS everywhere, gossip encrypted) runs a job across
// executors, through a failover, as a plain one does.
func TestTLSClusterRunsAJob(t *testing.T) {
	skipShort(t)
	c, histPath := newHistoryCluster(t, Options{TLS: true})
	task := []string{"sh", "-c", `echo "start $JOBMASTER_EXECUTION_ID" >> "$HISTORY"; echo out-$JOBMASTER_SUBTASK; sleep 1`}
	c.Submit("secure", jobSpec(t, "secure", nil,
		vertex{ID: "a", Parallelism: 4, Command: task},
		vertex{ID: "b", Parallelism: 2, Command: task, Inputs: []map[string]any{{"from": "a", "mode": "blocking"}}},
	))
	c.WaitJob("secure", 30*time.Second, "RUNNING")
	old := c.Leader()
	old.Kill()
	next := c.Leader()
	require.NotEqual(t, old, next)
	j := c.WaitJob("secure", 60*time.Second, "FINISHED")
	hist, err := readHistory(histPath)
	require.NoError(t, err)
	requireNoRestarts(t, j, hist)
	executors := map[string]bool{}
	for _, s := range subtasks(j) {
		executors[s.Executor] = true
	}
	assert.Len(t, executors, 2, "both executors ran tasks")

	// The client reads a task's log from its executor, over TLS.
	rc, err := c.Client.Logs(c.ctx(), "secure", "b", 1, "stdout")
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	assert.Equal(t, "out-1\n", string(b))

	// Data moves executor to executor over mutual TLS.
	c.Submit("sums", genSum(t, "sums", ""))
	c.WaitJob("sums", 60*time.Second, "FINISHED")
	require.Equal(t, wantSum, c.sumOf(t, "sums"))
	c.waitNoBytes(t, "sums")
}

// What a secure cluster refuses, each over real processes: plain
// connections, commands and Raft from the wrong role, a push for another
// executor, and a node without the gossip key.
func TestTLSClusterRefuses(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{TLS: true, Executors: 1, Runtime: "sim"})
	leader := c.Leader()
	e1 := c.Executors[0]

	// Plain HTTP to every HTTP port gets a 400 and nothing else.
	plain := &http.Client{Timeout: 5 * time.Second}
	for _, addr := range []string{leader.HTTPAddr, e1.HTTPAddr} {
		resp, err := plain.Get("http://" + addr + "/v1/health")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, addr)
		assert.Contains(t, string(body), "HTTPS server")
	}
	// Raft speaks TLS only, and to servers only.
	conn, err := net.DialTimeout("tcp", leader.RaftAddr, 5*time.Second)
	require.NoError(t, err)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = conn.Write([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	data, err := io.ReadAll(conn)
	conn.Close()
	require.NoError(t, err, "the Raft port closes a plain connection at once")
	if len(data) > 0 {
		assert.Equal(t, byte(0x15), data[0], "all it says is a TLS alert")
	}
	for _, role := range []pki.Role{pki.Executor, pki.Client} {
		f := c.CA.Files(role, "intruder")
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		require.NoError(t, err)
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", leader.RaftAddr,
			&tls.Config{ServerName: "127.0.0.1", RootCAs: caPool(t, c.CA.CAFile()), Certificates: []tls.Certificate{cert}})
		if err == nil {
			_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = tc.Write([]byte{0})
			_, err = tc.Read(make([]byte, 1))
			tc.Close()
		}
		require.Error(t, err, "Raft admitted a %s certificate", role)
		assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "a %s certificate is refused at the handshake", role)
	}

	// An executor's certificate cannot command an executor.
	ex := c.client(pki.Executor, "e9")
	l := wire.Leader{Version: wire.Version, Token: 1 << 40, Node: "m9"}
	for path, body := range map[string]any{
		wire.PathDeploy:    wire.NewDeployRequest(l, []wire.Task{{ExecutionID: "evil/v/0/0", JobID: "evil", Vertex: "v", Parallelism: 1, Command: []string{"true"}}}),
		wire.PathCancel:    wire.CancelRequest{Leader: l},
		wire.PathHeartbeat: wire.HeartbeatRequest{Leader: l},
		wire.PathRelease:   wire.ReleaseRequest{Leader: l},
	} {
		code, msg := post(t, ex, transport.URL(ex, e1.HTTPAddr, path), body)
		assert.Equal(t, http.StatusForbidden, code, "%s: %s", path, msg)
	}
	got, err := e1.Executions()
	require.NoError(t, err)
	assert.Less(t, got.FencingToken, uint64(1<<40), "the forged token reached the executor")

	// e1's certificate cannot push for e2; its own pushes go through.
	rep := wire.Report{Version: wire.Version, Executor: "e2", Instance: "x", Partial: true}
	code, msg := post(t, c.client(pki.Executor, "e1"), transport.URL(ex, leader.HTTPAddr, wire.PathExecutorUpdate), rep)
	assert.Equal(t, http.StatusForbidden, code, "%s", msg)
	assert.Contains(t, msg, `the certificate of executor \"e1\" cannot push for executor \"e2\"`)
	c.Submit("ok", jobSpec(t, "ok", nil, vertex{ID: "v", Parallelism: 2, Command: []string{"true"}, Env: nil}))
	c.WaitJob("ok", 30*time.Second, "FINISHED")

	// A node with another gossip key, or none, is no member; one with the
	// key joins meanwhile.
	other, err := membership.NewKey()
	require.NoError(t, err)
	wrongRing := c.dir + "/wrong.keyring"
	require.NoError(t, membership.WriteKeyring(wrongRing, []string{other}))
	wrong := c.AddExecutorWith(func(o *launch.Executor) { o.GossipKeyring = wrongRing })
	none := c.AddExecutorWith(func(o *launch.Executor) { o.GossipKeyring = "" })
	wrong.Start()
	none.Start()
	time.Sleep(3 * time.Second) // many join attempts (every 2 s) and probe rounds
	good := c.AddExecutor()
	good.Start()
	WaitFor(t, "the executor with the key to join", 30*time.Second, func() bool {
		return c.executorStatus(good.ID) == "alive"
	})
	for _, n := range []*Node{wrong, none} {
		assert.Empty(t, c.executorStatus(n.ID), "%s, without the gossip key, is known to the leader", n.ID)
		assert.True(t, n.Running(), "%s runs (it just has no one to talk to)", n.ID)
	}
}

// The gossip key is rotated in place, as docs/security.md describes: the
// keyring file gets the new key, then the new key first, then the old key
// removed, and each step reaches every node by SIGHUP before the next
// starts. Nothing is lost on the way; afterwards the old key admits
// nobody.
func TestGossipKeyRotationBySIGHUP(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{TLS: true, Executors: 2, Runtime: "sim"})
	b, err := os.ReadFile(c.GossipKeyring)
	require.NoError(t, err)
	var oldKey string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			oldKey = l
		}
	}
	newKey, err := membership.NewKey()
	require.NoError(t, err)
	nodes := append(append([]*Node{}, c.Masters...), c.Executors...)
	reloads := func(n *Node) int {
		b, _ := os.ReadFile(n.LogPath)
		return bytes.Count(b, []byte("gossip keyring reloaded"))
	}
	for step, keys := range [][]string{{oldKey, newKey}, {newKey, oldKey}, {newKey}} {
		require.NoError(t, membership.WriteKeyring(c.GossipKeyring, keys))
		for _, n := range nodes {
			before := reloads(n)
			require.NoError(t, syscall.Kill(n.Pid(), syscall.SIGHUP))
			WaitFor(t, n.ID+" to reload its keyring", 10*time.Second, func() bool { return reloads(n) > before })
		}
		id := "rot-" + string(rune('a'+step))
		c.Submit(id, jobSpec(t, id, nil, vertex{ID: "v", Parallelism: 4, Command: []string{"true"}}))
		c.WaitJob(id, 30*time.Second, "FINISHED")
	}
	time.Sleep(2 * time.Second) // probe rounds: a node that missed a step would be suspected
	for _, e := range c.Executors {
		assert.Equal(t, "alive", c.executorStatus(e.ID), e.ID)
	}
	for _, v := range c.ClusterView().Masters {
		assert.Equal(t, "alive", v.Status, v.ID)
	}
	oldRing := c.dir + "/old.keyring"
	require.NoError(t, membership.WriteKeyring(oldRing, []string{oldKey}))
	stale := c.AddExecutorWith(func(o *launch.Executor) { o.GossipKeyring = oldRing })
	stale.Start()
	fresh := c.AddExecutor()
	fresh.Start()
	WaitFor(t, "an executor with the new key to join", 30*time.Second, func() bool { return c.executorStatus(fresh.ID) == "alive" })
	time.Sleep(time.Second)
	assert.Empty(t, c.executorStatus(stale.ID), "the removed key still admits a node")
}

// client is an HTTP client of the cluster's CA holding the certificate of
// role and id.
func (c *Cluster) client(role pki.Role, id string) *http.Client {
	hc := transport.NewClient(transport.ClientOptions{Timeout: 5 * time.Second, TLS: c.CA.Load(role, id)})
	c.t.Cleanup(hc.CloseIdleConnections)
	return hc
}

func caPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	p := x509.NewCertPool()
	require.True(t, p.AppendCertsFromPEM(b))
	return p
}

func post(t *testing.T, hc *http.Client, url string, body any) (int, string) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := hc.Post(url, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}
