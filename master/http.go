package master

import (
	"fmt"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"jobmaster/acl"
	"jobmaster/api"
	"jobmaster/jobspec"
	"jobmaster/metrics"
	"jobmaster/strictjson"
	"jobmaster/transport"
	"jobmaster/wire"
)

// routes builds the HTTP API (docs/api.md): the router within what every
// request meets.
func (m *Master) routes() http.Handler {
	rt := m.router()
	return m.metrics.http.Wrap(transport.Role(transport.RoleMaster, m.namesLeader(recoverPanics(m, canonicalPaths(m.guard(rt))))))
}

// router routes every endpoint of the HTTP API.
func (m *Master) router() *router {
	rt := newRouter()
	rt.handle("/v1/jobs", map[string]http.HandlerFunc{
		http.MethodGet:  takes(m.listRead(m.leaderRead(m.listJobs)), "stale", "status", "prefix"),
		http.MethodPost: m.createJob,
	})
	rt.handle("/v1/jobs/{id}", map[string]http.HandlerFunc{
		http.MethodGet: takes(m.bigRead(m.leaderRead(m.getJob)), "stale"),
		http.MethodPut: m.putJob,
	})
	rt.handle("/v1/jobs/{id}/cancel", map[string]http.HandlerFunc{
		http.MethodPost: m.leaderWrite(m.cancelJob),
	})
	rt.handle(acl.LogsPattern, map[string]http.HandlerFunc{
		http.MethodGet: takes(m.taskLogs, logParams...),
	})
	rt.handle("/v1/cluster", map[string]http.HandlerFunc{
		http.MethodGet: takes(m.leaderRead(m.cluster), "stale"),
	})
	rt.handle("/v1/health", map[string]http.HandlerFunc{http.MethodGet: m.health})
	rt.handle("/v1/metrics", map[string]http.HandlerFunc{http.MethodGet: metrics.Handler(m.metrics.reg).ServeHTTP})
	rt.handle(eventsPath, map[string]http.HandlerFunc{http.MethodGet: m.events})
	rt.handle("/v1/state/hash", map[string]http.HandlerFunc{http.MethodGet: m.stateHash})
	rt.handle("/v1/internal/executor-update", map[string]http.HandlerFunc{
		http.MethodPost: m.requirePusher(m.leaderWrite(m.executorUpdate)),
	})
	rt.handle(relayPath, map[string]http.HandlerFunc{
		http.MethodPost: m.requireServer(m.submitBatch),
	})
	rt.handle(tokenPath, map[string]http.HandlerFunc{
		http.MethodGet: m.requireServer(m.tokenForPeer),
	})
	rt.handle(raftPositionPath, map[string]http.HandlerFunc{
		http.MethodGet: m.requireServer(m.raftPosition),
	})
	rt.handle("/v1/executors/{id}/drain", map[string]http.HandlerFunc{
		http.MethodPost:   m.drainExecutor,
		http.MethodDelete: m.undrainExecutor,
	})
	rt.handle(wire.PathExecutorDrain, map[string]http.HandlerFunc{
		http.MethodPost: m.requirePusher(m.leaderWrite(m.selfDrain)),
	})
	rt.handle("/v1/operator/snapshot", map[string]http.HandlerFunc{
		http.MethodGet: m.leaderRead(m.snapshotSave),
		http.MethodPut: m.snapshotRestore,
	})
	rt.handle("/v1/operator/raft/peers", map[string]http.HandlerFunc{
		http.MethodGet: m.leaderRead(m.raftPeers),
	})
	rt.handle("/v1/operator/raft/peers/{id}", map[string]http.HandlerFunc{
		http.MethodDelete: m.leaderWrite(m.removePeer),
	})
	m.aclRoutes(rt)
	m.uiRoutes(rt)
	rt.mux.HandleFunc(acl.CatchAll, func(w http.ResponseWriter, r *http.Request) {
		if redirectToUI(w, r) {
			return
		}
		if r.URL.Path == "/" { // the UI's redirect is GET only
			notAllowed(w, r, []string{http.MethodGet, http.MethodHead})
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, strictjson.Short(r.URL.Path)))
	})
	return rt
}

// takes answers 400 to a request with a query parameter not among
// allowed, before h (and before any wait for a leader).
func takes(h http.HandlerFunc, allowed ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := onlyParams(r.URL.Query(), allowed...); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		h(w, r)
	}
}

// router is the masters' mux, which knows the methods each of its
// patterns serves: a request to a method a route does not serve is
// answered 405 (and one to no route 404) before any token is asked for,
// since nothing is served to it.
type router struct {
	mux *http.ServeMux
	// served holds each pattern's methods (HEAD with GET); read-only once
	// the routes are built.
	served map[string][]string
}

func newRouter() *router {
	return &router{mux: http.NewServeMux(), served: map[string][]string{}}
}

// handle routes pattern to h, one handler per method; other methods get
// a 405 naming the allowed ones.
func (rt *router) handle(pattern string, h map[string]http.HandlerFunc) {
	var allowed []string
	for k := range h {
		allowed = append(allowed, k)
		if k == http.MethodGet {
			allowed = append(allowed, http.MethodHead)
		}
	}
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	rt.served[pattern] = allowed
	rt.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if f, ok := h[r.Method]; ok {
			f(w, r)
			return
		}
		if f, ok := h[http.MethodGet]; ok && r.Method == http.MethodHead {
			f(w, r) // the server sends the headers only
			return
		}
		notAllowed(w, r, allowed)
	})
}

// serves reports whether the route pattern answers method with what it
// serves (not a 405); the catch-all serves every method (an answer that
// serves nothing).
func (rt *router) serves(pattern, method string) bool {
	allowed, ok := rt.served[pattern]
	return !ok || slices.Contains(allowed, method)
}

// notAllowed answers 405 with the methods allowed.
func notAllowed(w http.ResponseWriter, r *http.Request, allowed []string) {
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", strictjson.Short(r.Method), strictjson.Short(r.URL.Path)))
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
