package transport

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Drive-by requests: what a web page can make a browser send to a server
// it has no business with (docs/security.md, "Drive-by requests"). A page
// from any site may make the browser POST to http://127.0.0.1:7401 with a
// body of type text/plain, application/x-www-form-urlencoded or
// multipart/form-data without asking the server first, and the browser
// names the page's origin in an Origin header. Both roles refuse such
// requests whatever their settings: a write whose body is not of the type
// its endpoint takes (CheckContentType, 415), and a request from another
// origin (CheckOrigin, 403). Browsers cannot send application/json or
// application/octet-stream across origins without a preflight, which no
// jobmaster server answers.

// Media types of request bodies.
const (
	JSONType   = "application/json"
	BinaryType = "application/octet-stream"
)

// writes are the methods whose body changes something.
func write(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// hasBody reports whether a request to a server carries a body: one with a
// length, or one sent chunked (its length unknown).
func hasBody(r *http.Request) bool {
	return r.ContentLength > 0 || (r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody)
}

// CheckContentType refuses (415) a write with a body whose Content-Type is
// not want (parameters such as charset are ignored). A bodiless write
// (POST .../cancel) and a read need no Content-Type.
//
// A body with a Content-Encoding (gzip, ...) is refused too (415): nothing
// here decodes one, and read as it is it would be another body than the
// one sent.
func CheckContentType(r *http.Request, want string) error {
	if !write(r.Method) || !hasBody(r) {
		return nil
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return &StatusError{Code: http.StatusUnsupportedMediaType,
			Message: fmt.Sprintf("%s %s takes its body as is, not with Content-Encoding %q", r.Method, r.URL.Path, ce)}
	}
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && strings.EqualFold(mt, want) {
		return nil
	}
	msg := fmt.Sprintf("%s %s takes a body of type %s, not %q", r.Method, r.URL.Path, want, ct)
	if ct == "" {
		msg = fmt.Sprintf("%s %s takes a body of type %s: send Content-Type: %s", r.Method, r.URL.Path, want, want)
	}
	return &StatusError{Code: http.StatusUnsupportedMediaType, Message: msg}
}

// CheckOrigin refuses (403) a request whose Origin header names another
// origin than the server's own: the scheme the request came in by (https
// with TLS) and the host it was sent to (its Host header), ports compared
// with their defaults filled in. A request without Origin (every client
// but a browser) passes; so does a same-origin page's (the masters' UI).
//
// Over plain HTTP it also refuses a browser's request (one with Origin or
// the Sec-Fetch-* headers browsers send) whose Host is a name, not an IP
// address or localhost: another site can point its own name at a node's
// address (DNS rebinding), and its page is then same-origin with the node.
// With TLS the node's certificate does not cover that name.
func CheckOrigin(r *http.Request) error {
	if err := checkRebinding(r); err != nil {
		return err
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	scheme := SchemeHTTP
	if r.TLS != nil {
		scheme = SchemeHTTPS
	}
	if sameOrigin(origin, scheme, r.Host) {
		return nil
	}
	return &StatusError{Code: http.StatusForbidden,
		Message: fmt.Sprintf("cross-origin request refused: Origin %q is not %s://%s (jobmaster serves no other site's pages)", origin, scheme, r.Host)}
}

// checkRebinding refuses a browser's plain HTTP request addressed to a
// name (CheckOrigin).
func checkRebinding(r *http.Request) error {
	if r.TLS != nil || !fromBrowser(r) {
		return nil
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") {
		return nil
	}
	return &StatusError{Code: http.StatusForbidden,
		Message: fmt.Sprintf("a browser's request to %q refused: over plain HTTP a browser must address this node by an IP address or localhost, since another site could point that name at it; serve it with TLS to use a name", r.Host)}
}

// fromBrowser reports whether a browser sent r: browsers name the origin
// of every request but a same-origin GET or HEAD, and send the Sec-Fetch-*
// headers with every request (those that support them: all current ones).
func fromBrowser(r *http.Request) bool {
	return r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Sec-Fetch-Mode") != ""
}

// sameOrigin reports whether origin (an Origin header) is scheme://host.
func sameOrigin(origin, scheme, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return false // "null", garbage
	}
	if !strings.EqualFold(u.Scheme, scheme) {
		return false
	}
	return hostPort(u.Host, scheme) == hostPort(host, scheme)
}

// hostPort is a host[:port] in lower case with the scheme's default port
// filled in.
func hostPort(h, scheme string) string {
	h = strings.ToLower(h)
	if _, _, err := net.SplitHostPort(h); err == nil {
		return h
	}
	port := "80"
	if scheme == SchemeHTTPS {
		port = "443"
	}
	return net.JoinHostPort(strings.Trim(h, "[]"), port)
}
