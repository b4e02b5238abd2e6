package transport

import (
	"net/http"
	"strings"
)

// Schemes of the URLs roles dial: https when TLS is on (Scheme).
const (
	SchemeHTTP  = "http"
	SchemeHTTPS = "https"
)

// BaseURL returns the base URL of addr as c dials it: "https://host:port"
// for "host:port" when c speaks TLS, else "http://host:port" (Scheme). An
// address that already carries a scheme keeps it, without a trailing slash.
// BaseURL does not check addr: an address from a user is checked where it
// is parsed (package client).
func BaseURL(c *http.Client, addr string) string {
	return BaseURLScheme(Scheme(c), addr)
}

// BaseURLScheme is BaseURL for a caller that knows the scheme but has no
// client yet (package client, parsing its addresses).
func BaseURLScheme(scheme, addr string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimRight(addr, "/")
	}
	return scheme + "://" + addr
}

// URL returns the URL of path (which starts with '/' and may carry a
// query) at the peer at addr, as c dials it (BaseURL).
func URL(c *http.Client, addr, path string) string {
	return BaseURL(c, addr) + path
}

// HostPort returns addr without its scheme and trailing slash, for
// messages: "host:port".
func HostPort(addr string) string {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		addr = rest
	}
	return strings.TrimRight(addr, "/")
}
