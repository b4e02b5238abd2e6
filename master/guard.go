package master

import (
	"net/http"
	"strconv"

	"jobmaster/acl"
	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// guard is what every request meets once its path is canonical and before
// it is routed (docs/security.md): every answer is marked not to be cached
// or sniffed; in every mode, drive-by requests are
// refused (a write with a body of another type than its endpoint takes:
// 415; another origin: 403, but the reads the UI's pages make of the
// cluster's other masters, see crossOrigin), and the headers only masters may set are
// dropped from requests that do not come from a master; with ACLs on, the
// request's token is checked against the route's need (authorize), for a
// method the route serves.
func (m *Master) guard(rt *router) http.Handler {
	mux := rt.mux
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No answer is cached or sniffed (a token's secret is in one);
		// the UI's files and the event stream set their own caching.
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, pattern := mux.Handler(r)
		// Set on the request the metrics' wrapper holds: the mux sets it
		// on the copy authorize passes on, which the wrapper never sees.
		r.Pattern = pattern
		handled, peerRead := m.crossOrigin(w, r, pattern)
		if handled {
			return
		}
		if err := transport.CheckOrigin(r); err != nil && !peerRead {
			jsonFormat.Reject(w, err)
			return
		}
		if err := transport.CheckContentType(r, bodyType(r, pattern)); err != nil {
			jsonFormat.Reject(w, err)
			return
		}
		m.dropInternalHeaders(r)
		// A method the route does not serve is answered 405 whoever asks
		// (the routes are no secret: docs/api.md lists them).
		if m.cfg.ACL && rt.serves(pattern, r.Method) {
			var ok bool
			if r, ok = m.authorize(w, r, acl.Route{Method: r.Method, Pattern: pattern}); !ok {
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// bodyType is the media type of the body a route takes: a push takes a
// report as JSON or in binary (wire.AppendReport).
func bodyType(r *http.Request, pattern string) string {
	switch {
	case r.Method == http.MethodPut && pattern == "/v1/operator/snapshot":
		return transport.BinaryType
	case r.Method == http.MethodPost && pattern == relayPath:
		return transport.BinaryType // msgpack (relay.go)
	case r.Method == http.MethodPost && pattern == wire.PathExecutorUpdate && wire.IsBinary(r.Header.Get("Content-Type")):
		return transport.BinaryType
	}
	return transport.JSONType
}

// internalHeaders are set by masters on the requests they forward: the hop
// count that keeps a request from going round in circles, and the id a
// follower chose for a POST /v1/jobs before forwarding it.
var internalHeaders = []string{hopsHeader, jobIDHeader}

// dropInternalHeaders removes from r the headers that only a master may
// set, unless r comes from one. With TLS a master is a peer with a server
// certificate. Without TLS nothing tells a master from a client, so the
// hop count is kept only as what a master writes, a count from 1 to
// maxHops: a request is relayed at most maxHops times whatever it carries,
// and a client that sets it can only shorten its own request's way (the
// job id a client sets only names its own job, as a PUT would).
func (m *Master) dropInternalHeaders(r *http.Request) {
	if m.tls != nil {
		if peer, ok := transport.PeerIdentity(r); ok && peer.Role == pki.Server {
			return
		}
		for _, h := range internalHeaders {
			r.Header.Del(h)
		}
		return
	}
	if v := r.Header.Get(hopsHeader); v != "" && !validHops(v) {
		r.Header.Del(hopsHeader)
	}
}

// validHops reports whether v is a hop count a master writes.
func validHops(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n >= 1 && n <= maxHops && strconv.Itoa(n) == v
}
