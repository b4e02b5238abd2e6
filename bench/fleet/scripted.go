package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"jobmaster/membership"
	"jobmaster/transport"
	"jobmaster/wire"
)

// Scripted is an executor whose reports the benchmark writes: a measuring
// instrument for reconciliation. It joins gossip with an executor's
// metadata (so the leader finds it as it finds any executor) and speaks
// the wire protocol: it accepts deployments (the tasks are RUNNING at once
// and stay so), cancels (CANCELED at once), and answers heartbeats with
// what it holds. A trial arms it to change one heartbeat answer (leave out
// an execution it holds, or show one the leader never placed) and it
// timestamps that answer and every request that follows.
type Scripted struct {
	ID     string
	slots  int
	ln     net.Listener
	srv    *http.Server
	gossip *membership.Node
	client *http.Client

	mu      sync.Mutex
	held    map[string]wire.ExecutionStatus
	token   uint64
	leader  string // the newest leader's HTTP address
	deploys map[string]time.Time
	cancels map[string]time.Time
	beats   int
	armed   *armedReport
	changed chan struct{}
}

type armedReport struct {
	skip int
	drop string
	add  *wire.ExecutionStatus
	sent chan time.Time
}

// StartScripted starts a scripted executor on loopback, joined to join.
func StartScripted(id string, slots int, join []string) (*Scripted, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := newScripted(id, slots)
	s.ln = ln
	s.srv = &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	g, err := membership.Start(membership.Config{
		NodeID:   id,
		BindAddr: "127.0.0.1:0",
		Join:     join,
		Meta:     membership.Meta{Role: membership.RoleExecutor, HTTPAddr: ln.Addr().String(), Slots: slots, Version: wire.Version},
	})
	if err != nil {
		s.srv.Close()
		return nil, err
	}
	s.gossip = g
	return s, nil
}

func newScripted(id string, slots int) *Scripted {
	return &Scripted{
		ID: id, slots: slots,
		held:    make(map[string]wire.ExecutionStatus),
		deploys: make(map[string]time.Time),
		cancels: make(map[string]time.Time),
		changed: make(chan struct{}),
		client:  transport.NewClient(transport.ClientOptions{Timeout: 5 * time.Second}),
	}
}

// handler serves the executor's side of the wire protocol.
func (s *Scripted) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(wire.PathHeartbeat, s.serveHeartbeat)
	mux.HandleFunc(wire.PathDeploy, s.serveDeploy)
	mux.HandleFunc(wire.PathCancel, s.serveCancel)
	return mux
}

// Close stops serving and leaves gossip without a word.
func (s *Scripted) Close() {
	_ = s.gossip.Shutdown()
	s.srv.Close()
}

// notifyLocked wakes the waiters.
func (s *Scripted) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// admit records the leader of a request; it refuses (false) a stale one.
func (s *Scripted) admit(w http.ResponseWriter, l wire.Leader) bool {
	if l.Token < s.token {
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(wire.StaleToken{Error: "stale token", Token: s.token})
		return false
	}
	s.token = l.Token
	if l.Addr != "" {
		s.leader = l.Addr
	}
	return true
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func (s *Scripted) reportLocked(partial bool, execs []wire.ExecutionStatus) wire.Report {
	used := 0
	for _, e := range s.held {
		if !e.State.Terminal() {
			used++
		}
	}
	return wire.Report{Version: wire.Version, Executor: s.ID, Instance: "scripted", Token: s.token,
		Slots: s.slots, UsedSlots: used, Partial: partial, Executions: execs}
}

func (s *Scripted) listLocked() []wire.ExecutionStatus {
	out := make([]wire.ExecutionStatus, 0, len(s.held))
	for _, e := range s.held {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ExecutionID < out[j].ExecutionID })
	return out
}

func (s *Scripted) serveHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req wire.HeartbeatRequest
	if !decode(w, r, &req) {
		return
	}
	s.mu.Lock()
	if !s.admit(w, req.Leader) {
		s.mu.Unlock()
		return
	}
	for _, id := range req.Ack {
		if e, ok := s.held[id]; ok && e.State.Terminal() {
			delete(s.held, id)
		}
	}
	s.beats++
	var sent chan time.Time
	if a := s.armed; a != nil {
		if a.skip > 0 {
			a.skip--
		} else {
			if a.drop != "" {
				delete(s.held, a.drop)
			}
			if a.add != nil {
				s.held[a.add.ExecutionID] = *a.add
			}
			sent = a.sent
			s.armed = nil
		}
	}
	body, _ := json.Marshal(s.reportLocked(false, s.listLocked()))
	s.notifyLocked()
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	at := time.Now()
	_, _ = w.Write(body)
	if sent != nil {
		sent <- at
	}
}

// serveDeploy takes a deploy as JSON or in binary, as an executor does,
// and answers in kind.
func (s *Scripted) serveDeploy(w http.ResponseWriter, r *http.Request) {
	var req wire.DeployRequest
	binary := wire.IsBinary(r.Header.Get("Content-Type"))
	if binary {
		data, err := transport.ReadBody(w, r, transport.MaxRequestBytes)
		if err == nil {
			req, err = wire.DecodeDeploy(data)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else if !decode(w, r, &req) {
		return
	}
	tasks, err := req.Tasks()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	s.mu.Lock()
	if !s.admit(w, req.Leader) {
		s.mu.Unlock()
		return
	}
	resp := wire.DeployResponse{Executions: make([]wire.ExecutionStatus, 0, len(tasks))}
	for _, t := range tasks {
		st, ok := s.held[t.ExecutionID]
		if !ok {
			st = wire.ExecutionStatus{ExecutionID: t.ExecutionID, JobID: t.JobID, Vertex: t.Vertex, Subtask: t.Subtask,
				Attempt: t.Attempt, Slot: t.Slot, State: wire.StateRunning}
			s.held[t.ExecutionID] = st
			s.deploys[t.ExecutionID] = now
		}
		resp.Executions = append(resp.Executions, st)
	}
	s.notifyLocked()
	s.mu.Unlock()
	if binary {
		w.Header().Set("Content-Type", wire.DeployType)
		_, _ = w.Write(wire.AppendDeployResponse(nil, &resp))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *Scripted) serveCancel(w http.ResponseWriter, r *http.Request) {
	var req wire.CancelRequest
	if !decode(w, r, &req) {
		return
	}
	now := time.Now()
	s.mu.Lock()
	if !s.admit(w, req.Leader) {
		s.mu.Unlock()
		return
	}
	for _, id := range req.IDs {
		if _, seen := s.cancels[id]; !seen {
			s.cancels[id] = now
		}
		if e, ok := s.held[id]; ok && !e.State.Terminal() {
			e.State = wire.StateCanceled
			s.held[id] = e
		}
	}
	s.notifyLocked()
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// Arm changes a coming heartbeat answer: after skip more heartbeats, the
// next answer leaves out drop (it is gone from this executor for good) and
// shows add (held from then on, until cancelled). The returned channel
// receives the time that answer was written.
func (s *Scripted) Arm(skip int, drop string, add *wire.ExecutionStatus) <-chan time.Time {
	ch := make(chan time.Time, 1)
	s.mu.Lock()
	s.armed = &armedReport{skip: skip, drop: drop, add: add, sent: ch}
	s.mu.Unlock()
	return ch
}

// wait blocks until cond (called under the lock) holds.
func (s *Scripted) wait(ctx context.Context, what string, cond func() bool) error {
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("scripted executor %s: waiting for %s: %w", s.ID, what, ctx.Err())
		}
	}
}

// WaitHeartbeats waits until n more heartbeats have been answered.
func (s *Scripted) WaitHeartbeats(ctx context.Context, n int) error {
	s.mu.Lock()
	target := s.beats + n
	s.mu.Unlock()
	return s.wait(ctx, "heartbeats", func() bool { return s.beats >= target })
}

// WaitDeploy waits for the deployment of id and returns when it arrived.
func (s *Scripted) WaitDeploy(ctx context.Context, id string) (time.Time, error) {
	return s.waitArrival(ctx, "deploy of "+id, s.deploys, id)
}

// WaitCancel waits for a cancel of id and returns when it arrived.
func (s *Scripted) WaitCancel(ctx context.Context, id string) (time.Time, error) {
	return s.waitArrival(ctx, "cancel of "+id, s.cancels, id)
}

// waitArrival waits until arrivals (guarded by s.mu) holds id and returns
// its time.
func (s *Scripted) waitArrival(ctx context.Context, what string, arrivals map[string]time.Time, id string) (time.Time, error) {
	var at time.Time
	err := s.wait(ctx, what, func() bool {
		t, ok := arrivals[id]
		at = t
		return ok
	})
	return at, err
}

// Push sends the leader a partial report (what an executor pushes when an
// execution changes) that shows st, which this executor now holds. It
// returns the time the push was sent.
func (s *Scripted) Push(ctx context.Context, st wire.ExecutionStatus) (time.Time, error) {
	s.mu.Lock()
	s.held[st.ExecutionID] = st
	addr := s.leader
	body, _ := json.Marshal(s.reportLocked(true, []wire.ExecutionStatus{st}))
	s.mu.Unlock()
	if addr == "" {
		return time.Time{}, errors.New("no leader has contacted the scripted executor yet")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, transport.URL(s.client, addr, wire.PathExecutorUpdate), bytes.NewReader(body))
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	at := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return at, err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return at, fmt.Errorf("push answered %s", resp.Status)
	}
	return at, nil
}
