// Package ui is the masters' web UI: static pages embedded in the binary
// (static/), served at /ui/ with a strict Content-Security-Policy, and the
// rule by which a master lets the pages of its cluster's other masters read
// its API (cors.go).
//
// The pages hold no data and no secret: they read the same API as any
// client, with the user's token, which they keep in the browser's
// sessionStorage only. Every master serves them, so a user may open any;
// when the master a page came from dies, the page goes on reading the
// others, whose addresses it learnt from GET /v1/cluster. That is the one
// cross-origin traffic the UI needs, and a master allows it for reads only
// and only from an origin that is one of its cluster's masters.
package ui

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"jobmaster/strictjson"
)

//go:embed static
var files embed.FS

// Prefix is the path the UI is served under.
const Prefix = "/ui/"

// Handler serves the UI's files under Prefix. peers lists the origins of
// the cluster's masters (scheme://host:port, see Origins); the page may
// connect to them and to its own origin, nothing else.
func Handler(peers func() []string) http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	fsrv := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetHeaders(w.Header(), peers())
		// Files only: a directory other than the UI's own (its
		// index.html) is no page, and its listing is nobody's business.
		// What is not a file is answered as the API answers an error.
		if p := strings.Trim(path.Clean("/"+strings.TrimPrefix(r.URL.Path, Prefix)), "/"); p != "" {
			if st, err := fs.Stat(sub, p); err != nil || st.IsDir() {
				notFound(w, r)
				return
			}
		}
		fsrv.ServeHTTP(w, r)
	})
}

// notFound answers 404 with a JSON error body, as the API does.
func notFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	b, _ := json.Marshal(map[string]string{"error": "no such file in the UI: " + strictjson.Short(r.URL.Path)})
	_, _ = w.Write(append(b, '\n'))
}

// SetHeaders sets the security headers of every UI answer: the
// Content-Security-Policy (CSP), no framing, no sniffing, no referrer, and
// no caching, so that a master upgraded in place serves its own pages.
func SetHeaders(h http.Header, peers []string) {
	h.Set("Content-Security-Policy", CSP(peers))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-cache")
}

// CSP is the UI's Content-Security-Policy: scripts, styles and images from
// the master itself only (no inline script or style, no eval), API calls to
// it and to the cluster's other masters, no forms, frames, plugins or base
// URL.
func CSP(peers []string) string {
	connect := []string{"'self'"}
	for _, p := range peers {
		if validOrigin(p) {
			connect = append(connect, p)
		}
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self'",
		"img-src 'self'",
		"connect-src " + strings.Join(connect, " "),
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}
