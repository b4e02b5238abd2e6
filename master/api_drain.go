package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/membership"
	"jobmaster/strictjson"
	"jobmaster/wire"
)

// maxDrainDeadline bounds the deadline a drain request may ask for.
const maxDrainDeadline = time.Duration(fsm.MaxDrainDeadline) * time.Millisecond

// parseDrainDeadline reads the deadline of a drain request's body (empty:
// the default).
func parseDrainDeadline(body []byte) (time.Duration, error) {
	var req api.DrainRequest
	if b := bytes.TrimSpace(body); len(b) > 0 && string(b) != "null" { // null: no body
		if err := strictjson.Body(body, &req, "drain request"); err != nil {
			return 0, err
		}
	}
	if req.Deadline == "" {
		req.Deadline = api.DefaultDrainDeadline
	}
	d, err := time.ParseDuration(req.Deadline)
	switch {
	case err != nil:
		return 0, fmt.Errorf("deadline %q is not a duration such as \"30s\"", strictjson.Short(req.Deadline))
	case d < 0:
		return 0, fmt.Errorf("deadline %q is negative", req.Deadline)
	case d > maxDrainDeadline:
		return 0, fmt.Errorf("deadline %q is longer than %s", req.Deadline, maxDrainDeadline)
	}
	return d, nil
}

// drainRequest reads a drain request's executor id and body, answering 400
// (or what readBody answers) when either is bad.
func drainRequest(w http.ResponseWriter, r *http.Request) (id string, body []byte, ok bool) {
	id = r.PathValue("id")
	if err := jobspec.CheckID(id); err != nil {
		writeError(w, http.StatusBadRequest, "executor id: "+err.Error())
		return "", nil, false
	}
	body, ok = readBody(w, r)
	return id, body, ok
}

// drainExecutor: POST /v1/executors/{id}/drain {"deadline": "30s"}. 202:
// the executor takes no new work from now on, and what still runs there
// at the deadline is moved.
func (m *Master) drainExecutor(w http.ResponseWriter, r *http.Request) {
	id, body, ok := drainRequest(w, r)
	if !ok {
		return
	}
	deadline, err := parseDrainDeadline(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	m.onLeader(w, r, body, func(w http.ResponseWriter, r *http.Request, _ []byte, s *session) error {
		if !m.knowsExecutor(s, id) {
			writeError(w, http.StatusNotFound, m.unknownExecutor(id))
			return nil
		}
		cmd := &fsm.DrainExecutor{Fenced: s.fenced(), Executor: id, DeadlineMs: deadline.Milliseconds()}
		if _, err := m.prop.ProposeOne(r.Context(), cmd); err != nil {
			return err
		}
		m.audit(r, "executor drain", "executor", id, "deadline", deadline)
		s.kick()
		writeJSON(w, http.StatusAccepted, api.DrainResponse{Executor: id, Draining: true, Deadline: cmd.Time + cmd.DeadlineMs})
		return nil
	})
}

// undrainExecutor: DELETE /v1/executors/{id}/drain. The executor is
// eligible for work again; 200 whether or not it was draining.
func (m *Master) undrainExecutor(w http.ResponseWriter, r *http.Request) {
	id, body, ok := drainRequest(w, r)
	if !ok {
		return
	}
	m.onLeader(w, r, body, func(w http.ResponseWriter, r *http.Request, _ []byte, s *session) error {
		draining := false
		m.fsm.Read(func(st *fsm.State) { draining = st.Draining(id) })
		if !draining && !m.knowsExecutor(s, id) {
			writeError(w, http.StatusNotFound, m.unknownExecutor(id))
			return nil
		}
		if draining {
			_, err := m.prop.ProposeOne(r.Context(), &fsm.UndrainExecutor{Fenced: s.fenced(), Executor: id})
			if err != nil && !errors.Is(err, fsm.ErrNotDraining) {
				return err
			}
			m.audit(r, "executor undrain", "executor", id)
			s.kick()
		}
		writeJSON(w, http.StatusOK, api.DrainResponse{Executor: id})
		return nil
	})
}

// selfDrain: POST /v1/internal/executor-drain, an executor asking for its
// own drain because it was told to stop. With TLS only that executor's
// certificate (or a master relaying it) may ask (requirePusher).
func (m *Master) selfDrain(w http.ResponseWriter, _ *http.Request, body []byte, s *session) error {
	var req wire.DrainRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "malformed drain request: "+err.Error())
		return nil
	}
	if req.Version != wire.Version {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("wire protocol version %d, this master speaks %d", req.Version, wire.Version))
		return nil
	}
	if err := jobspec.CheckID(req.Executor); err != nil {
		writeError(w, http.StatusBadRequest, "executor id: "+err.Error())
		return nil
	}
	if req.DeadlineMs < 0 || req.DeadlineMs > fsm.MaxDrainDeadline || len(req.Instance) > 64 {
		writeError(w, http.StatusBadRequest, "drain request: deadline or instance out of bounds")
		return nil
	}
	cmd := &fsm.DrainExecutor{Fenced: s.fenced(), Executor: req.Executor, DeadlineMs: req.DeadlineMs, Self: true, Instance: req.Instance}
	m.fsm.Read(func(st *fsm.State) {
		if d, ok := st.DrainOf(req.Executor); ok && !d.Self {
			// An operator's drain stays the operator's: the executor only
			// brings its deadline forward.
			cmd.Self, cmd.Instance = false, ""
			cmd.DeadlineMs = min(cmd.DeadlineMs, max(0, d.Deadline-cmd.Time))
		}
	})
	if _, err := m.prop.ProposeOne(s.ctx, cmd); err != nil {
		return err
	}
	m.log.Info("executor drains itself before it stops", "executor", req.Executor, "deadline", time.Duration(req.DeadlineMs)*time.Millisecond)
	s.kick()
	writeJSON(w, http.StatusAccepted, api.DrainResponse{Executor: req.Executor, Draining: true, Deadline: cmd.Time + cmd.DeadlineMs})
	return nil
}

// knowsExecutor reports whether the leader's table, the state or gossip
// knows an executor of this id.
// unknownExecutor says that id names no executor, and which ones gossip
// knows.
func (m *Master) unknownExecutor(id string) string {
	var ids []string
	for _, mem := range m.gossip.Role(membership.RoleExecutor) {
		ids = append(ids, mem.ID)
	}
	if len(ids) == 0 {
		return fmt.Sprintf("executor %q not found (no executor is known)", id)
	}
	return fmt.Sprintf("executor %q not found (the executors: %s)", id, strings.Join(ids, ", "))
}

func (m *Master) knowsExecutor(s *session, id string) bool {
	if _, ok := s.tracker.core.Status(id); ok {
		return true
	}
	for _, mem := range m.gossip.Role(membership.RoleExecutor) {
		if mem.ID == id {
			return true
		}
	}
	known := false
	m.fsm.Read(func(st *fsm.State) { known = st.Draining(id) })
	return known
}
