package transport

import "strings"

// Scheme is the scheme of every URL a role dials.
const Scheme = "http"

// schemePrefix is what a base URL starts with.
const schemePrefix = Scheme + "://"

// BaseURL returns the base URL of addr: "http://host:port" for "host:port".
// An address that already carries a scheme keeps it, without a trailing
// slash. BaseURL does not check addr: an address from a user is checked
// where it is parsed (package client).
func BaseURL(addr string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimRight(addr, "/")
	}
	return schemePrefix + addr
}

// URL returns the URL of path (which starts with '/' and may carry a
// query) at the peer at addr.
func URL(addr, path string) string {
	return BaseURL(addr) + path
}

// HostPort returns addr without its scheme and trailing slash, for
// messages: "host:port".
func HostPort(addr string) string {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		addr = rest
	}
	return strings.TrimRight(addr, "/")
}
