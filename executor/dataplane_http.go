package executor

import (
	"fmt"
	"net/http"

	"jobmaster/wire"
)

// serveRelease answers POST /v1/internal/release: fenced like a cancel,
// 204 once the partitions named are deleted.
func (e *Executor) serveRelease(w http.ResponseWriter, r *http.Request) {
	var req wire.ReleaseRequest
	if !decodeLeaderRequest(w, r, &req, &req.Leader) {
		return
	}
	if rerr := e.release(e.cfg.Now(), req); rerr != nil {
		writeJSON(w, rerr.code, rerr.body)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// servePartitions answers GET /v1/partitions: every partition held.
func (e *Executor) servePartitions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.Partitions{Partitions: e.store.List()})
}

// servePartitionData answers another executor's fetch (GET
// /v1/internal/partition): its parameters are checked and bounded (400),
// its fence judged as a leader's would be, but never taken: a fetch
// carrying an older token than the newest seen from its cluster, or a
// cluster seen replaced, gets 409 and nothing else. The bytes come from
// the store (partition.Store.Serve).
func (e *Executor) servePartitionData(w http.ResponseWriter, r *http.Request) {
	q, err := parseFetch(r.URL.Query(), r.Header)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	e.mu.Lock()
	_, stale, why := admitFence(e.fence, q.Cluster, q.Token)
	newest := e.fence.Token
	e.mu.Unlock()
	if stale {
		e.metrics.refusals.WithLabelValues(refusedFetch).Inc()
		e.log.Warn("refused a fetch with a stale fence", "execution", q.Producer, "cluster", q.Cluster, "token", q.Token, "reason", why)
		writeJSON(w, http.StatusConflict, wire.StaleToken{
			Error: fmt.Sprintf("executor %s refuses a fetch of %s: %s", e.cfg.NodeID, q.Producer, why),
			Token: newest,
		})
		return
	}
	e.store.Serve(w, r, q.Request)
}
