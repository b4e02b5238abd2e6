package executor

import (
	"fmt"
	"net/http"
	"strings"

	"jobmaster/metrics"
	"jobmaster/transport"
	"jobmaster/wire"
)

// jsonFormat is how an executor lays out its JSON answers: compact
// (docs/api.md).
const jsonFormat = transport.Compact

// routes serves the executor's endpoints; every error answer is JSON.
func (e *Executor) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(wire.PathDeploy, only(http.MethodPost, e.serveDeploy))
	mux.HandleFunc(wire.PathCancel, only(http.MethodPost, e.serveCancel))
	mux.HandleFunc(wire.PathHeartbeat, only(http.MethodPost, e.serveHeartbeat))
	mux.HandleFunc(wire.PathExecutions, only(http.MethodGet, e.serveExecutions))
	mux.HandleFunc(wire.PathLogs, only(http.MethodGet, e.serveLogs))
	mux.HandleFunc(wire.PathRelease, only(http.MethodPost, e.serveRelease))
	mux.HandleFunc(wire.PathPartitions, only(http.MethodGet, e.servePartitions))
	mux.HandleFunc(wire.PathPartitionData, only(http.MethodGet, e.servePartitionData))
	mux.HandleFunc("/v1/metrics", only(http.MethodGet, metrics.Handler(e.metrics.reg).ServeHTTP))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		msg := fmt.Sprintf("no such endpoint: %s", r.URL.Path)
		if strings.HasPrefix(r.URL.Path, "/v1/jobs") || strings.HasPrefix(r.URL.Path, "/v1/cluster") {
			msg += fmt.Sprintf(" (this is executor %s: the job API is on the masters)", e.cfg.NodeID)
		}
		writeError(w, http.StatusNotFound, msg)
	})
	return e.metrics.http.Wrap(transport.Role(transport.RoleExecutor, e.guard(mux)))
}

// only restricts a handler to one method.
func only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			allow := method
			if method == http.MethodGet {
				allow += ", " + http.MethodHead
			}
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use %s", r.Method, r.URL.Path, method))
			return
		}
		h(w, r)
	}
}

// serveDeploy takes a deploy as JSON or in binary (wire.DeployType), and
// answers a 200 in the format it was asked in; a binary deploy of another
// revision is refused (415), having done nothing.
func (e *Executor) serveDeploy(w http.ResponseWriter, r *http.Request) {
	var req wire.DeployRequest
	bin := isBinary(r)
	if ct := r.Header.Get("Content-Type"); bin && !wire.IsDeploy(ct) {
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("this executor reads binary deploys of %s, not %q: send JSON", wire.DeployType, ct))
		return
	}
	if bin {
		if !decodeBinaryDeploy(w, r, &req) {
			return
		}
	} else if !decodeLeaderRequest(w, r, &req, &req.Leader) {
		return
	}
	// Cheap checks before the deploy is expanded into tasks, which builds
	// an execution id per task from its group's ids.
	if rerr := e.refuseStale(req.Leader); rerr != nil {
		writeJSON(w, rerr.code, rerr.body)
		return
	}
	if err := checkDeploy(&req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
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
	resp := wire.DeployResponse{Executions: execs}
	if bin {
		w.Header().Set("Content-Type", wire.DeployType)
		_, _ = w.Write(wire.AppendDeployResponse(nil, &resp))
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// isBinary reports whether a request's body is in binary (wire.BinaryType).
func isBinary(r *http.Request) bool {
	return wire.IsBinary(r.Header.Get("Content-Type"))
}

// decodeBinaryDeploy is decodeLeaderRequest for a deploy in binary.
func decodeBinaryDeploy(w http.ResponseWriter, r *http.Request, req *wire.DeployRequest) bool {
	data, err := transport.ReadBody(w, r, transport.MaxRequestBytes)
	if err != nil {
		jsonFormat.Reject(w, err)
		return false
	}
	if *req, err = wire.DecodeDeploy(data); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return checkLeader(w, &req.Leader)
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
	bin := wire.AcceptsReport(r.Header.Values("Accept"))
	rep, rerr := e.heartbeat(e.cfg.Now(), req, bin)
	if rerr != nil {
		writeJSON(w, rerr.code, rerr.body)
		return
	}
	if bin {
		w.Header().Set("Content-Type", wire.ReportType)
		_, _ = w.Write(wire.AppendReport(nil, &rep))
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
	if err := transport.DecodeBody(w, r, v, transport.MaxRequestBytes); err != nil {
		jsonFormat.Reject(w, err)
		return false
	}
	return checkLeader(w, l)
}

// checkLeader checks a leader request's protocol version and cluster id;
// on failure it has answered with a 400.
func checkLeader(w http.ResponseWriter, l *wire.Leader) bool {
	if l.Version != wire.Version {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unsupported protocol version %d: this executor speaks version %d", l.Version, wire.Version))
		return false
	}
	if err := validCluster(l.Cluster); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	jsonFormat.WriteJSON(w, code, v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	jsonFormat.WriteError(w, code, msg)
}
