package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"jobmaster/wire"
)

// maxBodyBytes bounds a request body; a larger one gets 413.
const maxBodyBytes = 1 << 20

// routes serves the executor's endpoints; every error answer is JSON.
func (e *Executor) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(wire.PathDeploy, only(http.MethodPost, e.serveDeploy))
	mux.HandleFunc(wire.PathCancel, only(http.MethodPost, e.serveCancel))
	mux.HandleFunc(wire.PathHeartbeat, only(http.MethodPost, e.serveHeartbeat))
	mux.HandleFunc(wire.PathExecutions, only(http.MethodGet, e.serveExecutions))
	mux.HandleFunc(wire.PathLogs, only(http.MethodGet, e.serveLogs))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		msg := fmt.Sprintf("no such endpoint: %s", r.URL.Path)
		if strings.HasPrefix(r.URL.Path, "/v1/jobs") || strings.HasPrefix(r.URL.Path, "/v1/cluster") {
			msg += fmt.Sprintf(" (this is executor %s: the job API is on the masters)", e.cfg.NodeID)
		}
		writeError(w, http.StatusNotFound, msg)
	})
	return mux
}

// only restricts a handler to one method.
func only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use %s", r.Method, r.URL.Path, method))
			return
		}
		h(w, r)
	}
}

func (e *Executor) serveDeploy(w http.ResponseWriter, r *http.Request) {
	var req wire.DeployRequest
	if !decodeLeaderRequest(w, r, &req, &req.Leader) {
		return
	}
	tasks, err := req.Tasks()
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	execs, rerr := e.deploy(e.cfg.Now(), req.Leader, tasks)
	if rerr != nil {
		writeJSON(w, rerr.code, rerr.body)
		return
	}
	writeJSON(w, http.StatusOK, wire.DeployResponse{Executions: execs})
}

func (e *Executor) serveCancel(w http.ResponseWriter, r *http.Request) {
	var req wire.CancelRequest
	if !decodeLeaderRequest(w, r, &req, &req.Leader) {
		return
	}
	if rerr := e.cancel(e.cfg.Now(), req); rerr != nil {
		writeJSON(w, rerr.code, rerr.body)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (e *Executor) serveHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req wire.HeartbeatRequest
	if !decodeLeaderRequest(w, r, &req, &req.Leader) {
		return
	}
	rep, rerr := e.heartbeat(e.cfg.Now(), req)
	if rerr != nil {
		writeJSON(w, rerr.code, rerr.body)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (e *Executor) serveExecutions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, e.executions())
}

// decodeLeaderRequest reads a leader request's JSON body into v (whose
// Leader is l) and checks its protocol version. On failure it has answered
// with a 4xx and returns false. Unknown fields are ignored: a newer leader
// may add optional ones without a new protocol version (an incompatible
// change bumps wire.Version instead).
func decodeLeaderRequest(w http.ResponseWriter, r *http.Request, v any, l *wire.Leader) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("unexpected data after the JSON body")
			if terr != nil && !errors.Is(terr, io.ErrUnexpectedEOF) {
				err = terr
			}
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit))
		return false
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "empty request body: want a JSON object")
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("malformed request body: %v", err))
		return false
	case l.Version != wire.Version:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unsupported protocol version %d: this executor speaks version %d", l.Version, wire.Version))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(wire.Error{Error: err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, wire.Error{Error: msg})
}
