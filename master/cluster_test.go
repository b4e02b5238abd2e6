package master

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/internal/freeport"
	"jobmaster/transport"
)

// testCluster runs masters in this process on loopback, with real Raft
// (bolt, fsync on), real gossip and real HTTP.
type testCluster struct {
	t       *testing.T
	dir     string
	cfgs    []Config
	masters []*Master
}

func freeAddr(t *testing.T) string { return freeport.Must(t) }

type testLogWriter struct {
	t  *testing.T
	mu sync.Mutex
	on bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func newTestCluster(t *testing.T, n int, tweaks ...func(*Config)) *testCluster {
	c := &testCluster{t: t, dir: t.TempDir()}
	lw := &testLogWriter{t: t, on: os.Getenv("JOBMASTER_TEST_LOG") != ""}
	t.Cleanup(func() {
		lw.mu.Lock()
		lw.on = false
		lw.mu.Unlock()
	})
	logger := slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var gossip []string
	for i := 0; i < n; i++ {
		gossip = append(gossip, freeAddr(t))
	}
	for i := 0; i < n; i++ {
		c.cfgs = append(c.cfgs, Config{
			NodeID:          fmt.Sprintf("m%d", i+1),
			DataDir:         filepath.Join(c.dir, fmt.Sprintf("m%d", i+1)),
			HTTPAddr:        freeAddr(t),
			RaftAddr:        freeAddr(t),
			GossipAddr:      gossip[i],
			Join:            gossip,
			BootstrapExpect: n,
			Logger:          logger,
			RaftLog:         lw,
			RaftLogLevel:    "info",
		})
		for _, f := range tweaks {
			f(&c.cfgs[i])
		}
	}
	c.masters = make([]*Master, n)
	for i := range c.cfgs {
		c.start(i)
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *testCluster) start(i int) {
	c.t.Helper()
	m, err := New(c.cfgs[i])
	require.NoError(c.t, err)
	c.masters[i] = m
}

func (c *testCluster) stop(i int) {
	if m := c.masters[i]; m != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(c.t, m.Shutdown(ctx))
		c.masters[i] = nil
	}
}

func (c *testCluster) stopAll() {
	for i := range c.masters {
		c.stop(i)
	}
}

// waitFor polls until cond holds; the bound is generous and only a broken
// implementation reaches it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leader waits for exactly one running master to lead with an established
// epoch and returns its index.
func (c *testCluster) leader() int {
	c.t.Helper()
	idx := -1
	waitFor(c.t, "a leader", func() bool {
		idx = -1
		for i, m := range c.masters {
			if m != nil && m.IsLeader() {
				if idx >= 0 {
					return false
				}
				idx = i
			}
		}
		return idx >= 0
	})
	return idx
}

func (c *testCluster) follower() int {
	l := c.leader()
	for i, m := range c.masters {
		if m != nil && i != l {
			return i
		}
	}
	c.t.Fatal("no follower")
	return -1
}

type httpResult struct {
	status int
	body   []byte
	header http.Header
}

func do(t *testing.T, method, url string, body []byte, headers ...string) httpResult {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", transport.JSONType)
		if strings.Contains(url, "/v1/operator/snapshot") {
			req.Header.Set("Content-Type", transport.BinaryType)
		}
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return httpResult{status: resp.StatusCode, body: b, header: resp.Header}
}

func (c *testCluster) url(i int, path string) string {
	return "http://" + c.masters[i].HTTPAddr() + path
}

func decode[T any](t *testing.T, r httpResult) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.body, &v), "body: %s", r.body)
	return v
}

// waitSameState waits until every running master has applied the same
// index and reports the same state hash.
func (c *testCluster) waitSameState() string {
	c.t.Helper()
	var hash string
	waitFor(c.t, "equal state hashes", func() bool {
		var first *api.StateHash
		for _, m := range c.masters {
			if m == nil {
				continue
			}
			// Read in the process: GET /v1/state/hash wants a token on a
			// cluster with ACLs, and its 401 decoded as a zero hash made
			// every master look the same.
			snap := m.FSM().Capture()
			h := api.StateHash{AppliedIndex: snap.Index(), Hash: snap.Hash()}
			if first == nil {
				first = &h
				continue
			}
			if h.AppliedIndex != first.AppliedIndex || h.Hash != first.Hash {
				return false
			}
		}
		hash = first.Hash
		return true
	})
	return hash
}

const simpleJob = `{"name":"simple","vertices":[{"id":"v","parallelism":2,"command":["true"]}]}`

// requireAccepted checks a PUT of a job was accepted: 201, or 200 when a
// leader change cut an earlier attempt of the same request short after it
// had committed (the forward is retried, and the job is then "already
// there"). Both mean the job exists with this spec.
func requireAccepted(t *testing.T, r httpResult) {
	t.Helper()
	require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.status, "%s", r.body)
}

// wipe stops master i and deletes its data directory: its disk is lost.
func (c *testCluster) wipe(i int) {
	c.stop(i)
	require.NoError(c.t, os.RemoveAll(c.cfgs[i].DataDir))
}
