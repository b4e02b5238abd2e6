package integration

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/fsm"
	"jobmaster/membership"
	"jobmaster/transport"
)

// A cluster secured as `jobmaster dev` runs (TLS, gossip encryption,
// ACLs) runs a job across executors for a submit token, shows it to a read
// token, and refuses the read token's cancel; through a failover the
// tokens keep working.
func TestTLSACLClusterRunsAJob(t *testing.T) {
	skipShort(t)
	c, histPath := newHistoryCluster(t, Options{TLS: true, ACL: true})
	submitter := c.ClientWith(c.Token("submit", "ci"))
	reader := c.ClientWith(c.Token("read", "dashboard"))
	nobody := c.ClientWith("")
	ctx := c.ctx()

	task := []string{"sh", "-c", `echo "start $JOBMASTER_EXECUTION_ID" >> "$HISTORY"; echo out-$JOBMASTER_SUBTASK; sleep 1`}
	spec := jobSpec(t, "guarded", nil,
		vertex{ID: "a", Parallelism: 4, Command: task},
		vertex{ID: "b", Parallelism: 2, Command: task, Inputs: []map[string]any{{"from": "a", "mode": "blocking"}}},
	)
	_, err := reader.SubmitJob(ctx, "guarded", []byte(spec))
	requireStatus(t, err, http.StatusForbidden)
	_, err = nobody.SubmitJob(ctx, "guarded", []byte(spec))
	requireStatus(t, err, http.StatusUnauthorized)
	created, err := submitter.SubmitJob(ctx, "guarded", []byte(spec))
	require.NoError(t, err)
	require.True(t, created)

	WaitFor(t, "the job to run", 30*time.Second, func() bool {
		j, err := reader.Job(ctx, "guarded")
		return err == nil && j.Status == "RUNNING"
	})
	requireStatus(t, reader.CancelJob(ctx, "guarded"), http.StatusForbidden)
	_, err = nobody.Jobs(ctx)
	requireStatus(t, err, http.StatusUnauthorized)

	old := c.Leader()
	old.Kill()
	require.NotEqual(t, old, c.Leader())
	var j *api.Job
	WaitFor(t, "the job to finish", 60*time.Second, func() bool {
		j, err = reader.Job(ctx, "guarded")
		return err == nil && j.Status == "FINISHED"
	})
	hist, err := readHistory(histPath)
	require.NoError(t, err)
	requireNoRestarts(t, j, hist)

	// Logs come from the executor, which admits the harness's client
	// certificate; a user without one is refused there.
	rc, err := reader.Logs(ctx, "guarded", "b", 1, "stdout")
	require.NoError(t, err)
	b, _ := io.ReadAll(rc)
	rc.Close()
	assert.Equal(t, "out-1\n", string(b))
	anon := transport.NewClient(transport.ClientOptions{Timeout: 5 * time.Second, TLS: loadCA(t, c)})
	resp, err := anon.Get(transport.URL(anon, c.Executors[0].HTTPAddr, "/v1/executions"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "an executor's reads need a certificate of the cluster")

	// A second job, cancelled by its submitter.
	require.NoError(t, submitter.CancelJob(ctx, "guarded"), "cancelling an ended job is accepted")
	_, err = submitter.SubmitJob(ctx, "long", []byte(jobSpec(t, "long", nil, vertex{ID: "v", Parallelism: 2, Command: []string{"sleep", "60"}})))
	require.NoError(t, err)
	require.NoError(t, submitter.CancelJob(ctx, "long"))
	c.WaitJob("long", 30*time.Second, "CANCELED")

	// The audit lines name the tokens, never their secrets.
	var logs strings.Builder
	for _, m := range c.Masters {
		b, _ := os.ReadFile(m.LogPath)
		logs.Write(b)
	}
	assert.Contains(t, logs.String(), `action="job submit" token=ci`)
	assert.Contains(t, logs.String(), `action="job cancel" token=ci`)
	assert.NotContains(t, logs.String(), c.ManagementToken)
}

func loadCA(t *testing.T, c *Cluster) *transport.TLS {
	tl, err := transport.LoadTLS(transport.TLSFiles{CA: c.CA.CAFile()})
	require.NoError(t, err)
	return tl
}

func requireStatus(t *testing.T, err error, status int) {
	t.Helper()
	var apiErr *client.APIError
	require.True(t, errors.As(err, &apiErr), "want an API error %d, got %v", status, err)
	require.Equal(t, status, apiErr.StatusCode, "%v", err)
}

// What a secured cluster refuses from outside, each over real processes:
// a foreign origin, a form's body, a hop count that is no master's, a
// restore that claims more than it holds, an env larger than a task takes,
// and an executor that claims 2e9 slots.
func TestSecureClusterRefusesDriveByAndOversizedInput(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{TLS: true, ACL: true, Executors: 1, Runtime: "sim"})
	l := c.Leader()
	var f *Node
	for _, m := range c.Masters {
		if m != l {
			f = m
		}
	}
	send := func(method, addr, path, ctype string, body []byte, headers ...string) (int, string) {
		req, err := http.NewRequest(method, c.URL(addr, path), bytes.NewReader(body))
		require.NoError(t, err)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := c.HTTP.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	spec := []byte(jobSpec(t, "x", nil, vertex{ID: "v", Parallelism: 1, Command: []string{"true"}}))

	code, msg := send("POST", f.HTTPAddr, "/v1/jobs", "text/plain", spec)
	assert.Equal(t, http.StatusUnsupportedMediaType, code, msg)
	code, msg = send("PUT", f.HTTPAddr, "/v1/jobs/x", "application/json", spec, "Origin", "https://evil.example")
	assert.Equal(t, http.StatusForbidden, code, msg)
	code, msg = send("PUT", c.Executors[0].HTTPAddr, "/v1/internal/deploy", "text/plain", []byte("{}"))
	assert.Equal(t, http.StatusUnsupportedMediaType, code, msg)

	// A hop count from a client certificate is dropped: the follower
	// relays the request at once rather than holding it as one that went
	// round in circles.
	start := time.Now()
	code, msg = send("PUT", f.HTTPAddr, "/v1/jobs/hops", "application/json", spec, "X-Jobmaster-Hops", "3")
	assert.Equal(t, http.StatusCreated, code, msg)
	assert.Less(t, time.Since(start), 3*time.Second)

	// A 40-odd-byte snapshot that claims 1e11 executions.
	var buf bytes.Buffer
	_, err := fsm.NewState().Capture().WriteTo(&buf)
	require.NoError(t, err)
	bomb := bytes.Replace(buf.Bytes(), []byte("\xa5execs\x00"), []byte("\xa5execs\xcf\x00\x00\x00\x17\x48\x76\xe8\x00"), 1)
	code, msg = send("PUT", f.HTTPAddr, "/v1/operator/snapshot", transport.BinaryType, bomb)
	assert.Equal(t, http.StatusBadRequest, code, msg)
	assert.Contains(t, msg, "it claims 100000000000 executions")

	// An env value larger than a task takes.
	big := []byte(jobSpec(t, "big", nil, vertex{ID: "v", Parallelism: 1, Command: []string{"true"}, Env: map[string]string{"BIG": strings.Repeat("x", 200<<10)}}))
	code, msg = send("PUT", f.HTTPAddr, "/v1/jobs/big", "application/json", big)
	assert.Equal(t, http.StatusBadRequest, code, msg)
	assert.Contains(t, msg, "vertices[0].env.BIG: 204804 bytes as NAME=value, at most 131071 allowed")

	// A gossip member that says it is an executor with 2e9 slots is
	// counted with 1024, and the leader says so in its log.
	keys, err := membership.LoadKeys(nil, c.GossipKeyring)
	require.NoError(t, err)
	var join []string
	for _, m := range c.Masters {
		join = append(join, m.GossipAddr)
	}
	g, err := membership.Start(membership.Config{NodeID: "greedy", BindAddr: freeAddr(t), Join: join, Keys: keys,
		Meta: membership.Meta{Role: membership.RoleExecutor, HTTPAddr: freeAddr(t), Slots: 2_000_000_000}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Shutdown() })
	WaitFor(t, "the leader to count the greedy executor", 30*time.Second, func() bool {
		var cl api.Cluster
		if c.getJSON(c.URL(l.HTTPAddr, "/v1/cluster"), &cl) != nil {
			return false
		}
		for _, e := range cl.Executors {
			if e.ID == "greedy" {
				return e.Slots == 1024
			}
		}
		return false
	})
	b, err := os.ReadFile(l.LogPath)
	require.NoError(t, err)
	assert.Contains(t, string(b), "claims a slot count outside what an executor may have")
	// The leader still places work.
	c.Submit("after", string(spec))
	c.WaitJob("after", 30*time.Second, "FINISHED", "RUNNING")
}
