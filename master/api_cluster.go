package master

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/hashicorp/raft"
	"golang.org/x/sync/semaphore"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/leader"
	"jobmaster/membership"
	"jobmaster/wire"
)

// cluster: GET /v1/cluster. Served by the leader (or, with ?stale, by any
// master from what it knows).
func (m *Master) cluster(w http.ResponseWriter, _ *http.Request, _ []byte, s *session) error {
	_, leaderID := m.raft.LeaderWithID()
	out := api.Cluster{Masters: []api.Master{}, Executors: []api.Executor{}}
	if leaderID != "" {
		l := string(leaderID)
		out.Leader = &l
	}
	var used map[string][]int
	var held map[string]int
	var inUse map[string]jobspec.Resources
	var drained map[string]bool
	var drains []fsm.Drain
	m.fsm.Read(func(st *fsm.State) {
		out.FencingToken = st.Epoch()
		out.ClusterID = st.Cluster()
		used = st.UsedSlots()
		held = st.PartitionsHeld()
		inUse = st.ResourcesInUse()
		drained = st.DrainStatus()
		drains = st.Drains()
		m.setIndex(w, st)
	})
	out.Masters = m.masters(leaderID)
	if s != nil {
		out.Executors = s.tracker.core.Executors(used, drained, m.cfg.Now())
		for i := range out.Executors {
			x := &out.Executors[i]
			if x.CPUMillis != 0 || x.MemoryMB != 0 {
				cpu, mem := max(0, x.CPUMillis-inUse[x.ID].CPUMillis), max(0, x.MemoryMB-inUse[x.ID].MemoryMB)
				x.FreeCPUMillis, x.FreeMemoryMB = &cpu, &mem
			}
		}
	} else {
		out.Executors = m.gossipExecutors(used, drained)
	}
	out.Executors = withDrainedAbsent(out.Executors, drains, drained)
	for i := range out.Executors {
		out.Executors[i].Partitions = held[out.Executors[i].ID]
	}
	withDeadlines(out.Executors, drains)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// withDrainedAbsent adds the executors under an operator's drain that are
// not listed (stopped, and forgotten): the drain lasts until it is
// disabled, and the list keeps saying so, drained if the state has nothing on it a
// job still needs, lost otherwise. Sorted by id.
func withDrainedAbsent(xs []api.Executor, drains []fsm.Drain, drained map[string]bool) []api.Executor {
	listed := make(map[string]bool, len(xs))
	for _, x := range xs {
		listed[x.ID] = true
	}
	added := false
	for _, d := range drains {
		if listed[d.Executor] || d.Self {
			continue // a drain an executor asked for on stopping ends when it starts again
		}
		st := "lost"
		if drained[d.Executor] {
			st = api.ExecutorDrained
		}
		xs = append(xs, api.Executor{ID: d.Executor, Status: st, Draining: true})
		added = true
	}
	if added {
		sort.SliceStable(xs, func(i, j int) bool { return xs[i].ID < xs[j].ID })
	}
	return xs
}

// withDeadlines fills in the drain deadline of every draining executor.
func withDeadlines(xs []api.Executor, drains []fsm.Drain) {
	at := make(map[string]int64, len(drains))
	for _, d := range drains {
		at[d.Executor] = d.Deadline
	}
	for i := range xs {
		if d, ok := at[xs[i].ID]; ok {
			xs[i].DrainDeadline = d
		}
	}
}

// masters lists the Raft configuration's servers with their roles and
// gossip status. A master gossip knows that is not (yet) in the
// configuration is not a master of the cluster and is not listed.
func (m *Master) masters(leader raft.ServerID) []api.Master {
	f := m.raft.GetConfiguration()
	if f.Error() != nil {
		return []api.Master{}
	}
	gossip := make(map[string]membership.Member)
	for _, mem := range m.gossip.Role(membership.RoleMaster) {
		gossip[mem.ID] = mem
	}
	out := make([]api.Master, 0, len(f.Configuration().Servers))
	for _, srv := range f.Configuration().Servers {
		id := string(srv.ID)
		x := api.Master{ID: id, Role: "follower", Status: membership.StatusDead}
		if mem, ok := gossip[id]; ok {
			x.HTTPAddr, x.Status = mem.Meta.HTTPAddr, mem.Status
		}
		switch {
		case srv.ID == leader:
			x.Role = "leader"
		case id == m.cfg.NodeID:
			x.Role = strings.ToLower(m.raft.State().String())
		}
		if id == m.cfg.NodeID {
			x.HTTPAddr, x.Status = m.httpAddr, membership.StatusAlive
		}
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// gossipExecutors is a follower's view of executors: gossip's, with dead
// ones shown as lost, and the drains of its replicated state.
func (m *Master) gossipExecutors(used map[string][]int, drains map[string]bool) []api.Executor {
	var out []api.Executor
	for _, mem := range m.gossip.Role(membership.RoleExecutor) {
		st := mem.Status
		if st == membership.StatusDead || st == membership.StatusLeft {
			st = "lost"
		}
		slots, _ := leader.SlotsOf(mem.Meta.Slots)
		drained, draining := drains[mem.ID]
		if drained && st != "lost" {
			st = api.ExecutorDrained
		}
		out = append(out, api.Executor{ID: mem.ID, HTTPAddr: mem.Meta.HTTPAddr, Slots: slots,
			FreeSlots: max(0, slots-len(used[mem.ID])), Status: st, Draining: draining})
	}
	if out == nil {
		out = []api.Executor{}
	}
	return out
}

// health: GET /v1/health. 200 when this master knows a leader, else 503.
func (m *Master) health(w http.ResponseWriter, _ *http.Request) {
	_, id := m.raft.LeaderWithID()
	h := api.Health{Node: m.cfg.NodeID}
	if id == "" {
		writeJSON(w, http.StatusServiceUnavailable, h)
		return
	}
	l := string(id)
	h.Leader = &l
	writeJSON(w, http.StatusOK, h)
}

// stateHash: GET /v1/state/hash. This master's own state, never forwarded.
// A hash copies the whole state (a capture) and encodes it: one is made
// at a time (the others wait, and give up when their client does), and
// kept for the requests that find the state at the same index.
func (m *Master) stateHash(w http.ResponseWriter, r *http.Request) {
	select {
	case m.hashing <- struct{}{}:
		defer func() { <-m.hashing }()
	case <-r.Context().Done():
		return
	}
	var index uint64
	m.fsm.Read(func(st *fsm.State) { index = st.Index() })
	if h := m.lastHash; h != nil && h.AppliedIndex == index {
		writeJSON(w, http.StatusOK, *h)
		return
	}
	c := m.fsm.Capture()
	h := api.StateHash{Node: m.cfg.NodeID, AppliedIndex: c.Index(), Hash: c.Hash()}
	m.lastHash = &h
	m.hashesMade++
	writeJSON(w, http.StatusOK, h)
}

// errReportRevision: a push in binary of a report revision this master
// does not read (wire.ReportRevision).
var errReportRevision = errors.New("a binary report of a revision this master does not read")

// decodeReport decodes a report (a push, or a heartbeat's answer), in
// binary or as JSON by its media type ct, within the bounds of one
// (wire.CheckBounds; JSON counted before it is decoded).
func decodeReport(ct string, body []byte) (wire.Report, error) {
	var rep wire.Report
	var err error
	switch {
	case wire.IsReport(ct):
		rep, err = wire.DecodeReport(body)
	case wire.IsBinary(ct):
		return rep, fmt.Errorf("%w (%q; it reads %s): send it as JSON", errReportRevision, ct, wire.ReportType)
	default:
		if err = wire.CheckJSONReport(body); err == nil {
			err = json.Unmarshal(body, &rep)
		}
	}
	if err != nil {
		return wire.Report{}, err
	}
	return rep, rep.CheckBounds()
}

// pushBudget bounds the bytes of pushed reports being decoded and carried
// out at once on a master.
const pushBudget = 8 << 20

// maxPushLocks bounds the executors that have a push lock of their own;
// past it (names no cluster has), the others share one.
const maxPushLocks = 4096

// pushLock is the lock that serializes the pushes of executor.
func (m *Master) pushLock(executor string) *semaphore.Weighted {
	m.pushMu.Lock()
	defer m.pushMu.Unlock()
	if l := m.pushLocks[executor]; l != nil {
		return l
	}
	if len(m.pushLocks) >= maxPushLocks {
		executor = "" // the shared one
		if l := m.pushLocks[executor]; l != nil {
			return l
		}
	}
	l := semaphore.NewWeighted(1)
	m.pushLocks[executor] = l
	return l
}

// pushedName is the executor a push names, read without decoding the
// report: the name at the head of a binary one, the executor field of a
// JSON one ("" if none).
func pushedName(r *http.Request, body []byte) string {
	if wire.IsReport(r.Header.Get("Content-Type")) {
		name, _ := wire.ReportExecutor(body)
		return name
	}
	var head struct {
		Executor string `json:"executor"`
	}
	_ = json.Unmarshal(body, &head)
	return head.Executor
}

// executorUpdate: POST /v1/internal/executor-update, an executor's push of
// state changes. The answer acknowledges terminal states now recorded.
func (m *Master) executorUpdate(w http.ResponseWriter, r *http.Request, body []byte, s *session) error {
	// One push of an executor at a time (it sends them one after another),
	// and at most pushBudget bytes of bodies decoded at once: a report
	// decodes to many times its bytes, and an executor's certificate
	// could otherwise send any number at once.
	one := m.pushLock(pushedName(r, body))
	if err := one.Acquire(r.Context(), 1); err != nil {
		return nil // the request has ended
	}
	defer one.Release(1)
	n := int64(max(1, min(len(body), pushBudget)))
	if err := m.pushes.Acquire(r.Context(), n); err != nil {
		return nil
	}
	defer m.pushes.Release(n)
	rep, err := decodeReport(r.Header.Get("Content-Type"), body)
	if errors.Is(err, errReportRevision) {
		writeError(w, http.StatusUnsupportedMediaType, err.Error())
		return nil
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "malformed report: "+err.Error())
		return nil
	}
	if rep.Version != wire.Version {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("wire protocol version %d, this master speaks %d", rep.Version, wire.Version))
		return nil
	}
	if rep.Executor == "" {
		writeError(w, http.StatusBadRequest, "report names no executor")
		return nil
	}
	acks := s.tracker.push(&rep)
	writeJSON(w, http.StatusOK, wire.UpdateResponse{Ack: acks})
	return nil
}
