package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"jobmaster/api"
	"jobmaster/transport"
	"jobmaster/wire"
)

// WaitFor polls until cond holds or fails the test after a generous bound.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c.t.Cleanup(cancel)
	return ctx
}

// ClusterView asks any running master for /v1/cluster.
func (c *Cluster) ClusterView() *api.Cluster {
	cl, err := c.Client.Cluster(c.ctx())
	if err != nil {
		c.t.Fatalf("cluster view: %v", err)
	}
	return cl
}

// Leader waits until the masters agree on a leader that holds a token, and
// returns it.
func (c *Cluster) Leader() *Node {
	c.t.Helper()
	var leader *Node
	WaitFor(c.t, "a leader", 30*time.Second, func() bool {
		leader = nil
		for _, m := range c.Masters {
			if !m.Running() {
				continue
			}
			var cl api.Cluster
			if err := c.getJSON(c.URL(m.HTTPAddr, "/v1/cluster?stale"), &cl); err != nil || cl.Leader == nil {
				return false
			}
			for _, x := range c.Masters {
				if x.ID == *cl.Leader && x.Running() {
					if leader != nil && leader != x {
						return false
					}
					leader = x
				}
			}
		}
		if leader == nil {
			return false
		}
		var cl api.Cluster
		return c.getJSON(c.URL(leader.HTTPAddr, "/v1/cluster"), &cl) == nil && cl.Leader != nil && *cl.Leader == leader.ID
	})
	return leader
}

// WaitExecutorsAlive waits until the leader reports every running
// executor alive.
func (c *Cluster) WaitExecutorsAlive() {
	c.t.Helper()
	WaitFor(c.t, "executors alive", 30*time.Second, func() bool {
		cl, err := c.Client.Cluster(c.ctx())
		if err != nil {
			return false
		}
		alive := map[string]bool{}
		for _, e := range cl.Executors {
			alive[e.ID] = e.Status == "alive"
		}
		for _, e := range c.Executors {
			if e.Running() && !alive[e.ID] {
				return false
			}
		}
		return true
	})
}

// Submit submits a job under an id.
func (c *Cluster) Submit(id, spec string) {
	c.t.Helper()
	if _, err := c.Client.SubmitJob(c.ctx(), id, []byte(spec)); err != nil {
		c.t.Fatalf("submit %s: %v", id, err)
	}
}

// Job reads a job.
func (c *Cluster) Job(id string) *api.Job {
	c.t.Helper()
	j, err := c.Client.Job(c.ctx(), id)
	if err != nil {
		c.t.Fatalf("job %s: %v", id, err)
	}
	return j
}

// WaitJob waits until the job's status is one of want and returns it.
func (c *Cluster) WaitJob(id string, timeout time.Duration, want ...string) *api.Job {
	c.t.Helper()
	var j *api.Job
	WaitFor(c.t, fmt.Sprintf("job %s to be %v", id, want), timeout, func() bool {
		var err error
		j, err = c.Client.Job(c.ctx(), id)
		if err != nil {
			return false
		}
		for _, w := range want {
			if j.Status == w {
				return true
			}
		}
		return false
	})
	return j
}

// Executions asks an executor what it holds.
func (n *Node) Executions() (*wire.Executions, error) {
	var out wire.Executions
	err := n.c.getJSON(n.c.URL(n.HTTPAddr, wire.PathExecutions), &out)
	return &out, err
}

// StateHashes reads every running master's state hash.
func (c *Cluster) StateHashes() map[string]api.StateHash {
	out := map[string]api.StateHash{}
	for _, m := range c.Masters {
		if !m.Running() {
			continue
		}
		var h api.StateHash
		if err := c.getJSON(c.URL(m.HTTPAddr, "/v1/state/hash"), &h); err == nil {
			out[m.ID] = h
		}
	}
	return out
}

// WaitSameState waits until every running master has the same applied
// index and state hash.
func (c *Cluster) WaitSameState() {
	c.t.Helper()
	WaitFor(c.t, "equal state hashes on all masters", 30*time.Second, func() bool {
		hs := c.StateHashes()
		var first *api.StateHash
		n := 0
		for _, h := range hs {
			h := h
			n++
			if first == nil {
				first = &h
			} else if h.Hash != first.Hash || h.AppliedIndex != first.AppliedIndex {
				return false
			}
		}
		running := 0
		for _, m := range c.Masters {
			if m.Running() {
				running++
			}
		}
		return n == running && n > 0
	})
}

// URL is the URL of path at the node at addr, as the harness reaches it.
func (c *Cluster) URL(addr, path string) string { return transport.URL(c.HTTP, addr, path) }

// getJSON GETs url through the harness's client and decodes a 200 answer.
func (c *Cluster) getJSON(url string, out any) error {
	resp, err := c.HTTP.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}
