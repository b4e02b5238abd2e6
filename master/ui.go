package master

import (
	"net/http"

	"jobmaster/transport"
	"jobmaster/ui"
)

// uiRoutes serves the web UI at /ui/ and redirects / there (docs/api.md).
func (m *Master) uiRoutes(rt *router) {
	files := ui.Handler(m.peerOrigins)
	rt.handle(ui.Prefix, map[string]http.HandlerFunc{
		http.MethodGet:  files.ServeHTTP,
		http.MethodHead: files.ServeHTTP,
	})
}

// redirectToUI answers GET / with a redirect to the UI, and reports
// whether it did.
func redirectToUI(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != "/" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	http.Redirect(w, r, ui.Prefix, http.StatusFound)
	return true
}

// peerOrigins are the origins of the cluster's masters, as their pages
// have them: the scheme this master serves and each master's HTTP address.
func (m *Master) peerOrigins() []string {
	scheme := transport.SchemeHTTP
	if m.tls != nil {
		scheme = transport.SchemeHTTPS
	}
	var addrs []string
	for _, x := range m.masters("") {
		addrs = append(addrs, x.HTTPAddr)
	}
	return ui.Origins(scheme, addrs)
}

// crossOrigin applies the UI's rule to a request that names another
// origin than this master's (ui.Decide): it reports whether the request
// goes on (an allowed read, its CORS headers set) and answers the
// preflights it allows itself. A request without Origin, or from this
// master's own origin, goes on untouched.
func (m *Master) crossOrigin(w http.ResponseWriter, r *http.Request, pattern string) (handled, pass bool) {
	origin := r.Header.Get("Origin")
	if origin == "" || transport.CheckOrigin(r) == nil {
		return false, false
	}
	switch ui.Decide(r.Method, pattern, origin, r.Header.Get("Access-Control-Request-Method"),
		r.Header.Get("Access-Control-Request-Headers"), m.peerOrigins()) {
	case ui.AllowRead:
		ui.SetCORS(w.Header(), origin, false)
		return false, true
	case ui.AnswerPreflight:
		ui.SetCORS(w.Header(), origin, true)
		w.WriteHeader(http.StatusNoContent)
		return true, false
	}
	return false, false
}
