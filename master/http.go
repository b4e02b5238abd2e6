package master

import (
	"fmt"
	"net/http"
	"path"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/hashicorp/raft"

	"jobmaster/api"
	"jobmaster/jobspec"
	"jobmaster/metrics"
	"jobmaster/transport"
	"jobmaster/wire"
)

// routes builds the HTTP API (docs/api.md).
func (m *Master) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/jobs", m.methods(map[string]http.HandlerFunc{
		http.MethodGet:  m.leaderRead(m.listJobs),
		http.MethodPost: m.createJob,
	}))
	mux.HandleFunc("/v1/jobs/{id}", m.methods(map[string]http.HandlerFunc{
		http.MethodGet: m.bigRead(m.leaderRead(m.getJob)),
		http.MethodPut: m.putJob,
	}))
	mux.HandleFunc("/v1/jobs/{id}/cancel", m.methods(map[string]http.HandlerFunc{
		http.MethodPost: m.leaderWrite(m.cancelJob),
	}))
	mux.HandleFunc("/v1/cluster", m.methods(map[string]http.HandlerFunc{
		http.MethodGet: m.leaderRead(m.cluster),
	}))
	mux.HandleFunc("/v1/health", m.methods(map[string]http.HandlerFunc{http.MethodGet: m.health}))
	mux.HandleFunc("/v1/metrics", m.methods(map[string]http.HandlerFunc{http.MethodGet: metrics.Handler(m.metrics.reg).ServeHTTP}))
	mux.HandleFunc(eventsPath, m.methods(map[string]http.HandlerFunc{http.MethodGet: m.events}))
	mux.HandleFunc("/v1/state/hash", m.methods(map[string]http.HandlerFunc{http.MethodGet: m.stateHash}))
	mux.HandleFunc("/v1/internal/executor-update", m.methods(map[string]http.HandlerFunc{
		http.MethodPost: m.requirePusher(m.leaderWrite(m.executorUpdate)),
	}))
	mux.HandleFunc(relayPath, m.methods(map[string]http.HandlerFunc{
		http.MethodPost: m.requireServer(m.submitBatch),
	}))
	mux.HandleFunc(tokenPath, m.methods(map[string]http.HandlerFunc{
		http.MethodGet: m.requireServer(m.tokenForPeer),
	}))
	mux.HandleFunc(raftPositionPath, m.methods(map[string]http.HandlerFunc{
		http.MethodGet: m.requireServer(m.raftPosition),
	}))
	mux.HandleFunc("/v1/executors/{id}/drain", m.methods(map[string]http.HandlerFunc{
		http.MethodPost:   m.drainExecutor,
		http.MethodDelete: m.undrainExecutor,
	}))
	mux.HandleFunc(wire.PathExecutorDrain, m.methods(map[string]http.HandlerFunc{
		http.MethodPost: m.requirePusher(m.leaderWrite(m.selfDrain)),
	}))
	mux.HandleFunc("/v1/operator/snapshot", m.methods(map[string]http.HandlerFunc{
		http.MethodGet: m.leaderRead(m.snapshotSave),
		http.MethodPut: m.snapshotRestore,
	}))
	mux.HandleFunc("/v1/operator/raft/peers", m.methods(map[string]http.HandlerFunc{
		http.MethodGet: m.leaderRead(m.raftPeers),
	}))
	mux.HandleFunc("/v1/operator/raft/peers/{id}", m.methods(map[string]http.HandlerFunc{
		http.MethodDelete: m.leaderWrite(m.removePeer),
	}))
	m.aclRoutes(mux)
	m.uiRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if redirectToUI(w, r) {
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return m.metrics.http.Wrap(transport.Role(transport.RoleMaster, m.namesLeader(recoverPanics(m, canonicalPaths(m.guard(mux))))))
}

// namesLeader sets api.LeaderHeader on every answer of h to the leader's
// HTTP address, when this master knows the leader.
func (m *Master) namesLeader(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if addr := m.leaderAddrForClients(); addr != "" {
			w.Header().Set(api.LeaderHeader, addr)
		}
		h.ServeHTTP(w, r)
	})
}

// leaderAddrForClients is the leader's HTTP address: this master's when it
// leads, else the one the leader gossips.
func (m *Master) leaderAddrForClients() string {
	if m.raft.State() == raft.Leader {
		return m.httpAddr
	}
	return m.leaderHTTPAddr()
}

// canonicalPaths answers a path with '.' or '..' segments or repeated
// slashes with a 400, where the mux would redirect with an HTML body: a job
// id "." or ".." gets the error any bad job id gets.
func canonicalPaths(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if c := path.Clean(p); c != p && c+"/" != p {
			if rest, ok := strings.CutPrefix(p, "/v1/jobs/"); ok {
				id, _, _ := strings.Cut(rest, "/")
				if err := jobspec.CheckID(id); err != nil {
					writeError(w, http.StatusBadRequest, "job id: "+err.Error())
					return
				}
			}
			writeError(w, http.StatusBadRequest, fmt.Sprintf("path %q is not canonical: remove empty, '.' and '..' segments", p))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// methods dispatches on the request method and answers 405 with a JSON
// error naming the allowed ones.
func (m *Master) methods(h map[string]http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if f, ok := h[r.Method]; ok {
			f(w, r)
			return
		}
		if f, ok := h[http.MethodGet]; ok && r.Method == http.MethodHead {
			f(w, r) // the server sends the headers only
			return
		}
		var allowed []string
		for k := range h {
			allowed = append(allowed, k)
			if k == http.MethodGet {
				allowed = append(allowed, http.MethodHead)
			}
		}
		sort.Strings(allowed)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
	}
}

// recoverPanics turns a panic in a handler into a 500: no request can crash
// a master.
func recoverPanics(m *Master, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				m.log.Error("panic in HTTP handler", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				writeError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// jsonFormat is how a master lays out its JSON answers (docs/api.md).
const jsonFormat = transport.Indented

func writeJSON(w http.ResponseWriter, status int, v any) {
	jsonFormat.WriteJSON(w, status, v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	jsonFormat.WriteError(w, status, msg)
}

// readBody reads a request body of at most api.MaxBodyBytes; a larger one
// is a 413.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := transport.ReadBody(w, r, api.MaxBodyBytes)
	if err != nil {
		jsonFormat.Reject(w, err)
		return nil, false
	}
	return body, true
}
