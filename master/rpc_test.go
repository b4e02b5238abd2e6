package master

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/fsm"
	"jobmaster/internal/pkitest"
	"jobmaster/leader"
	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// TestPostJSONErrors: the tracker tells a fenced-off leader from any other
// failure with errors.Is(err, errFencedOff), a request another executor
// refused as not its own with errMisdirected, and nothing else. Every
// request names the executor it is for.
func TestPostJSONErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.Header.Get(wire.HeaderExecutor); to != "e1" {
			transport.Compact.WriteError(w, http.StatusMisdirectedRequest, "this is executor e1, not "+to)
			return
		}
		switch r.URL.Path {
		case wire.PathHeartbeat:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(wire.StaleToken{Error: "stale fencing token 3: the newest seen is 7", Token: 7})
		case wire.PathDeploy:
			transport.Compact.WriteError(w, http.StatusBadRequest, "no tasks")
		default:
			transport.Compact.WriteJSON(w, http.StatusOK, wire.DeployResponse{})
		}
	}))
	defer srv.Close()
	c := transport.NewClient(transport.ClientOptions{})
	defer c.CloseIdleConnections()
	addr := transport.HostPort(srv.URL)
	ctx := context.Background()

	err := postJSON(ctx, c, "e1", addr, wire.PathHeartbeat, struct{}{}, nil, time.Minute)
	require.ErrorIs(t, err, errFencedOff)
	assert.Equal(t, "fenced off by a newer leader: stale fencing token 3: the newest seen is 7", err.Error())

	err = postJSON(ctx, c, "e1", addr, wire.PathDeploy, struct{}{}, nil, time.Minute)
	require.Error(t, err)
	assert.NotErrorIs(t, err, errFencedOff)
	var se *transport.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusBadRequest, se.Code)
	assert.Equal(t, "no tasks", se.Message)
	assert.Contains(t, err.Error(), addr+wire.PathDeploy)

	var out wire.DeployResponse
	require.NoError(t, postJSON(ctx, c, "e1", addr, wire.PathCancel, struct{}{}, &out, time.Minute))
	err = postJSON(ctx, c, "e9", addr, wire.PathCancel, struct{}{}, &out, time.Minute)
	require.ErrorIs(t, err, errMisdirected)
	assert.NotErrorIs(t, err, errFencedOff)
	_, err = postHeartbeat(ctx, c, "e9", addr, &wire.HeartbeatRequest{}, time.Minute)
	require.ErrorIs(t, err, errMisdirected)
	_, err = postDeploy(ctx, c, "e9", addr, &wire.DeployRequest{}, time.Minute)
	require.ErrorIs(t, err, errMisdirected)

	srv.Close()
	err = postJSON(ctx, c, "e1", addr, wire.PathCancel, struct{}{}, nil, time.Minute)
	require.Error(t, err, "no answer")
	var none *transport.StatusError
	assert.False(t, errors.As(err, &none), "no answer is no status: %v", err)
	assert.NotErrorIs(t, err, errFencedOff)
}

// A leader deploys in binary; an executor that predates the format refuses
// it (415) and acts on nothing, and gets that deploy, and every later one
// in the session, as JSON. Nothing is lost on the way: every task is
// answered once.
func TestDeployFallsBackToJSONForAnOlderExecutor(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{} // per executor, the content types of its deploys
	executor := func(name string, takesBinary bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ct := r.Header.Get("Content-Type")
			mu.Lock()
			got[name] = append(got[name], ct)
			mu.Unlock()
			data, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			var req wire.DeployRequest
			switch {
			case wire.IsBinary(ct) && !takesBinary:
				transport.Compact.WriteError(w, http.StatusUnsupportedMediaType, "POST /v1/internal/deploy takes a body of type application/json")
				return
			case wire.IsBinary(ct):
				req, err = wire.DecodeDeploy(data)
			default:
				err = json.Unmarshal(data, &req)
			}
			require.NoError(t, err)
			tasks, err := req.Tasks()
			require.NoError(t, err)
			var resp wire.DeployResponse
			for _, x := range tasks {
				resp.Executions = append(resp.Executions, wire.ExecutionStatus{ExecutionID: x.ExecutionID, JobID: x.JobID,
					Vertex: x.Vertex, Subtask: x.Subtask, Slot: x.Slot, State: wire.StateRunning})
			}
			if wire.IsBinary(ct) {
				w.Header().Set("Content-Type", wire.DeployType)
				_, _ = w.Write(wire.AppendDeployResponse(nil, &resp))
				return
			}
			transport.Compact.WriteJSON(w, http.StatusOK, resp)
		}))
	}
	older, newer := executor("older", false), executor("newer", true)
	defer older.Close()
	defer newer.Close()

	m := &Master{cfg: Config{NodeID: "m1", DeployRPCTimeout: time.Minute, Now: time.Now},
		log: slog.New(slog.DiscardHandler), client: transport.NewClient(transport.ClientOptions{})}
	defer m.client.CloseIdleConnections()
	m.metrics = newMasterMetrics(m)
	tr := &tracker{s: &session{m: m, token: 4, ctx: context.Background()}, m: m}
	deploy := func(name, addr string, n int) []deployAnswer {
		var wt []wire.Task
		for i := range n {
			wt = append(wt, wire.Task{ExecutionID: wire.ExecutionID("j", "v", i, 0), JobID: "j", Vertex: "v", Subtask: i,
				Parallelism: n, Slot: i, Command: []string{"true"}})
		}
		answers, failed := tr.postDeploys(leader.Deploy{Executor: name, Tasks: make([]fsm.TaskSpec, n)}, transport.HostPort(addr), wt)
		require.Empty(t, failed)
		return answers
	}
	// An executor that fails every deploy: every task is named failed.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		transport.Compact.WriteError(w, http.StatusInternalServerError, "disk on fire")
	}))
	defer broken.Close()
	var wt []wire.Task
	for i := range 2 {
		wt = append(wt, wire.Task{ExecutionID: wire.ExecutionID("b", "v", i, 0), JobID: "b", Vertex: "v", Subtask: i, Parallelism: 2, Slot: i, Command: []string{"true"}})
	}
	answers, failed := tr.postDeploys(leader.Deploy{Executor: "broken", Tasks: make([]fsm.TaskSpec, 2)}, transport.HostPort(broken.URL), wt)
	require.Empty(t, answers)
	require.Equal(t, []string{"b/v/0/0", "b/v/1/0"}, failed)

	for round := range 2 {
		for _, x := range []struct {
			name string
			srv  *httptest.Server
		}{{"older", older}, {"newer", newer}} {
			answers := deploy(x.name, x.srv.URL, 3)
			require.Len(t, answers, 1, "%s, round %d", x.name, round)
			require.Len(t, answers[0].executions, 3)
			require.Equal(t, "j/v/2/0", answers[0].executions[2].ExecutionID)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{wire.DeployType, "application/json", "application/json"}, got["older"],
		"refused binary once, then JSON for the session")
	assert.Equal(t, []string{wire.DeployType, wire.DeployType}, got["newer"])
}

// A heartbeat asks for the report in binary and takes whichever format
// the answer is in: binary of this revision, or JSON from an executor that
// ignores the Accept header (an older one); a 409 is errFencedOff as with
// JSON.
func TestPostHeartbeatTakesEitherFormat(t *testing.T) {
	want := wire.Report{Version: wire.Version, Executor: "e1", Instance: "i", Token: 4, Slots: 2,
		Executions: []wire.ExecutionStatus{{ExecutionID: "j/v/0/0", JobID: "j", Vertex: "v", State: wire.StateRunning}}}
	var mode atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked := r.Header.Get("Accept")
		switch mode.Load() {
		case "binary":
			if !wire.AcceptsReport(r.Header.Values("Accept")) {
				http.Error(w, "the leader did not ask for binary: "+asked, http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", wire.ReportType)
			_, _ = w.Write(wire.AppendReport(nil, &want))
		case "json":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(want)
		case "other revision":
			w.Header().Set("Content-Type", "application/octet-stream; report=9")
			_, _ = w.Write(wire.AppendReport(nil, &want))
		case "fenced":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":"stale fencing token 3","token":5}`))
		case "json bomb":
			// 2 MiB of empty statuses: 700,000 of them in 3 bytes each.
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"version":3,"executor":"e1","executions":[{}`))
			_, _ = w.Write(bytes.Repeat([]byte(`,{}`), 700_000))
			_, _ = w.Write([]byte(`]}`))
		}
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	for _, m := range []string{"binary", "json"} {
		mode.Store(m)
		got, err := postHeartbeat(context.Background(), srv.Client(), "e1", addr, &wire.HeartbeatRequest{}, time.Second)
		require.NoError(t, err, m)
		require.Equal(t, want, got, m)
	}
	mode.Store("other revision")
	_, err := postHeartbeat(context.Background(), srv.Client(), "e1", addr, &wire.HeartbeatRequest{}, time.Second)
	require.ErrorContains(t, err, "malformed answer")
	mode.Store("fenced")
	_, err = postHeartbeat(context.Background(), srv.Client(), "e1", addr, &wire.HeartbeatRequest{}, time.Second)
	require.ErrorIs(t, err, errFencedOff)
	mode.Store("json bomb")
	_, err = postHeartbeat(context.Background(), srv.Client(), "e1", addr, &wire.HeartbeatRequest{}, time.Second)
	require.ErrorIs(t, err, errAnswerRefused, "a JSON report past what a push may carry")
	require.ErrorContains(t, err, "larger than")
}

// Under TLS an executor's answer counts only from that executor's
// certificate: the certificate of executor e2 answering where the leader
// heartbeats e1 is errMisdirected (a compromised e2 announcing a fake
// member at its own address cannot take work under that name).
func TestExecutorAnswerMustComeFromItsCertificate(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA(rand.Reader, now, 2*time.Hour)
	require.NoError(t, err)
	cert := func(role pki.Role, id string) tls.Certificate {
		is, err := ca.Issue(rand.Reader, pki.Request{Identity: pki.Identity{Role: role, NodeID: id}, Now: now, Validity: time.Hour})
		require.NoError(t, err)
		c, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
		require.NoError(t, err)
		return c
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		transport.Compact.WriteJSON(w, http.StatusOK, wire.Report{Version: wire.Version, Executor: r.Header.Get(wire.HeaderExecutor)})
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert(pki.Executor, "e2")}}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer c.CloseIdleConnections()
	addr := transport.HostPort(srv.URL) // as gossip gives it

	_, err = postHeartbeat(context.Background(), c, "e1", addr, &wire.HeartbeatRequest{}, time.Minute)
	require.ErrorIs(t, err, errMisdirected)
	require.ErrorContains(t, err, "comes from the certificate of executor e2, not of executor e1")
	err = postJSON(context.Background(), c, "e1", addr, wire.PathCancel, wire.CancelRequest{}, nil, time.Minute)
	require.ErrorIs(t, err, errMisdirected)
	rep, err := postHeartbeat(context.Background(), c, "e2", addr, &wire.HeartbeatRequest{}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "e2", rep.Executor)

	srv.TLS.Certificates = []tls.Certificate{cert(pki.Server, "e2")}
	c.CloseIdleConnections()
	_, err = postHeartbeat(context.Background(), c, "e2", addr, &wire.HeartbeatRequest{}, time.Minute)
	require.ErrorIs(t, err, errMisdirected, "a master's certificate answered as an executor")
}

// A master that speaks TLS takes no executor's answer in the clear. A
// member of the gossip pool (no certificate needed) that announces an
// executor at "http://host:port" is refused twice: the address is not
// dialed (no scheme comes from a peer's address), and an answer that
// came without TLS, however the request went out in the clear, is not
// the executor's.
func TestATLSMasterRefusesAPlaintextExecutorAnswer(t *testing.T) {
	var asked atomic.Int32
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		transport.Compact.WriteJSON(w, http.StatusOK, wire.Report{Version: wire.Version, Executor: r.Header.Get(wire.HeaderExecutor)})
	}))
	defer fake.Close()
	ca := pkitest.New(t.TempDir())
	c := transport.NewClient(transport.ClientOptions{TLS: ca.Load(pki.Server, "m1"), PeerCheck: transport.NodePeer})
	defer c.CloseIdleConnections()
	require.Equal(t, transport.SchemeHTTPS, transport.Scheme(c))

	// The address as the fake member announces it: not dialed at all.
	_, err := postHeartbeat(context.Background(), c, "e1", fake.URL, &wire.HeartbeatRequest{}, time.Minute)
	require.ErrorIs(t, err, transport.ErrPeerAddress)
	err = postJSON(context.Background(), c, "e1", fake.URL, wire.PathCancel, wire.CancelRequest{}, nil, time.Minute)
	require.ErrorIs(t, err, transport.ErrPeerAddress)
	_, err = postDeploy(context.Background(), c, "e1", fake.URL, &wire.DeployRequest{}, time.Minute)
	require.ErrorIs(t, err, transport.ErrPeerAddress)
	require.Zero(t, asked.Load(), "nothing sent in the clear")

	// A request that went out in the clear anyway: its answer is refused.
	hr, err := http.NewRequest(http.MethodPost, fake.URL+wire.PathHeartbeat, strings.NewReader("{}"))
	require.NoError(t, err)
	resp, err := doExecutor(c, hr, "e1")
	require.ErrorIs(t, err, errMisdirected)
	require.ErrorContains(t, err, "came without TLS")
	require.Nil(t, resp)
	require.Equal(t, int32(1), asked.Load())

	// Without TLS on the master, the same answer is taken: nothing to check.
	plain := transport.NewClient(transport.ClientOptions{})
	defer plain.CloseIdleConnections()
	rep, err := postHeartbeat(context.Background(), plain, "e1", transport.HostPort(fake.URL), &wire.HeartbeatRequest{}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "e1", rep.Executor)
}

// A cancel or release of many ids goes in requests that an executor reads
// whole (below its 1 MiB body limit), every id once, in order, also ids
// that JSON escapes.
func TestChunkIDsFitAnExecutorsBodyLimit(t *testing.T) {
	var ids []string
	for i := range 300_000 {
		id := fmt.Sprintf("job-%d/vertex/%d/0", i%97, i)
		if i%1000 == 0 {
			id = strings.Repeat("\x01<", 50) // what a report may name
		}
		ids = append(ids, id)
	}
	chunks := chunkIDs(ids, idsPerRequestBytes)
	require.Greater(t, len(chunks), 1)
	var back []string
	for _, c := range chunks {
		body, err := json.Marshal(wire.CancelRequest{Leader: wire.Leader{Version: wire.Version, Cluster: strings.Repeat("c", 64), Node: "m1", Addr: "127.0.0.1:7401"}, IDs: c})
		require.NoError(t, err)
		require.Less(t, len(body), transport.MaxRequestBytes, "a request an executor refuses (413)")
		back = append(back, c...)
	}
	require.Equal(t, ids, back)
	require.Equal(t, [][]string{{strings.Repeat("x", 2000)}, {"a"}}, chunkIDs([]string{strings.Repeat("x", 2000), "a"}, 100))
	require.Empty(t, chunkIDs(nil, 100))
}
