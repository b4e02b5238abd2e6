package integration

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"jobmaster/api"
	"jobmaster/transport"
)

// Reading the masters' state hashes: during the run (hashMonitor) and at
// the end (converge, then snapshotMasters). The checker compares hashes
// only at equal applied indexes (checker_replicas.go).

// hashMonitor reads every running master's state hash at an interval, so
// that a divergence is seen near the moment it began, not only at the
// end. A paused master is skipped (the request would hang until it
// resumes).
type hashMonitor struct {
	c       *Cluster
	mu      sync.Mutex
	samples []HashSample
}

func (h *hashMonitor) sample() {
	for _, m := range h.c.Masters {
		if !m.Running() || m.Paused() {
			continue
		}
		if s, ok := readHash(h.c, m); ok {
			h.add(s)
		}
	}
}

func (h *hashMonitor) add(s HashSample) {
	h.mu.Lock()
	h.samples = append(h.samples, s)
	h.mu.Unlock()
}

// Samples returns every reading so far.
func (h *hashMonitor) Samples() []HashSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HashSample(nil), h.samples...)
}

// readHash reads one master's GET /v1/state/hash: its own applied index
// and the hash of its state there, taken together under the FSM's lock.
func readHash(c *Cluster, m *Node) (HashSample, bool) {
	var h api.StateHash
	if err := c.getJSON(c.URL(m.HTTPAddr, "/v1/state/hash"), &h); err != nil {
		return HashSample{}, false
	}
	return HashSample{Node: m.ID, Applied: h.AppliedIndex, Hash: h.Hash, At: time.Now().UnixNano()}, true
}

// converge waits, up to bound, until every master has reached the
// leader's applied index (or the highest any master shows, if that is
// higher: the cluster may still commit a little) and they all show the
// same one. Every reading goes to the monitor too.
func converge(c *Cluster, mon *hashMonitor, bound time.Duration) Convergence {
	start := time.Now()
	var conv Convergence
	if l := c.currentLeader(10 * time.Second); l != nil {
		conv.Leader = l.ID
		if s, ok := readHash(c, l); ok {
			mon.add(s)
			conv.Target = s.Applied
		}
	}
	deadline := start.Add(bound)
	for {
		last := map[string]HashSample{}
		for _, m := range c.Masters {
			if s, ok := readHash(c, m); ok {
				mon.add(s)
				last[m.ID] = s
				conv.Target = max(conv.Target, s.Applied)
			}
		}
		conv.Final = conv.Final[:0]
		same := len(last) == len(c.Masters)
		for _, m := range c.Masters {
			s, ok := last[m.ID]
			if ok {
				conv.Final = append(conv.Final, s)
			}
			same = same && ok && s.Applied == conv.Target
		}
		if same || time.Now().After(deadline) {
			conv.Reached, conv.Waited = same, time.Since(start)
			return conv
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// snapshotMasters reads each master's own job list together with its
// applied index and hash (a list read while the index moved is read
// again).
func snapshotMasters(c *Cluster) []MasterSnapshot {
	var out []MasterSnapshot
	for _, m := range c.Masters {
		s := MasterSnapshot{ID: m.ID}
		ok := awaitCond(10*time.Second, func() bool {
			var before, after api.StateHash
			var list api.JobList
			base := transport.BaseURL(c.HTTP, m.HTTPAddr)
			if err := c.getJSON(base+"/v1/state/hash", &before); err != nil {
				s.Err = err.Error()
				return false
			}
			if err := c.getJSON(base+"/v1/jobs?stale", &list); err != nil {
				s.Err = err.Error()
				return false
			}
			if err := c.getJSON(base+"/v1/state/hash", &after); err != nil {
				s.Err = err.Error()
				return false
			}
			if before.AppliedIndex != after.AppliedIndex {
				s.Err = "applied index moved while reading"
				return false
			}
			s.Jobs, s.Applied, s.Hash, s.Err = list.Jobs, after.AppliedIndex, after.Hash, ""
			s.At = time.Now().UnixNano()
			return true
		})
		if !ok && s.Err == "" {
			s.Err = "unreadable"
		}
		out = append(out, s)
	}
	return out
}

// settle converges and reads the job lists, again (up to three times) if
// the lists were read at different applied indexes: the cluster was still
// committing, and lists at different indexes cannot be compared.
func settle(c *Cluster, mon *hashMonitor, bound time.Duration) (Convergence, []MasterSnapshot) {
	var conv Convergence
	var masters []MasterSnapshot
	for try := 0; try < 3; try++ {
		conv = converge(c, mon, bound)
		masters = snapshotMasters(c)
		if !conv.Reached {
			break // the checker says who is behind
		}
		equal := true
		for _, m := range masters {
			equal = equal && m.Err == "" && m.Applied == masters[0].Applied
		}
		if equal {
			break
		}
	}
	return conv, masters
}

// finalsOf is each master's final applied index and hash, for the log.
func finalsOf(conv Convergence) string {
	var parts []string
	for _, s := range conv.Final {
		parts = append(parts, fmt.Sprintf("%s %d %s", s.Node, s.Applied, short(s.Hash)))
	}
	return strings.Join(parts, ", ")
}
