package client

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"jobmaster/transport"
)

// baseForm is the form of an address with a scheme, for messages:
// "http://host:port" or "https://host:port".
const baseForm = "http://host:port or https://host:port"

// ParseAddresses turns a comma-separated list of master HTTP addresses, each
// "host:port", "http://host:port" or "https://host:port", into base URLs
// ("http://host:port" for "host:port"), in order and without duplicates.
// Blanks around entries and empty entries are ignored; anything else that
// is not such an address is an error.
func ParseAddresses(list string) ([]string, error) {
	return parseAddresses(list, transport.SchemeHTTP)
}

// parseAddresses is ParseAddresses with the scheme that "host:port" takes.
func parseAddresses(list, scheme string) ([]string, error) {
	var out []string
	seen := make(map[string]bool)
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		base, err := parseAddress(part, scheme)
		if err != nil {
			return nil, err
		}
		if !seen[base] {
			seen[base] = true
			out = append(out, base)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no master address given: expected a comma-separated list of host:port or " + baseForm)
	}
	return out, nil
}

// ParseAddress turns one address, "host:port", "http://host:port" or
// "https://host:port" (a trailing slash is allowed), into its base URL:
// "http://host:port" for "host:port".
func ParseAddress(addr string) (string, error) {
	return parseAddress(addr, transport.SchemeHTTP)
}

// parseAddress is ParseAddress with the scheme that "host:port" takes.
func parseAddress(addr, scheme string) (string, error) {
	hostport := addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return "", fmt.Errorf("invalid address %q: %v", addr, err)
		}
		if u.Scheme != transport.SchemeHTTP && u.Scheme != transport.SchemeHTTPS {
			return "", fmt.Errorf("invalid address %q: scheme %q is not supported, use %s or host:port", addr, u.Scheme, baseForm)
		}
		scheme = u.Scheme
		if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("invalid address %q: expected %s with nothing after the port", addr, baseForm)
		}
		hostport = u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("invalid address %q: expected host:port or %s", addr, baseForm)
	}
	if host == "" || strings.ContainsAny(host, "/?#@ ") {
		return "", fmt.Errorf("invalid address %q: missing or malformed host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("invalid address %q: port %q is not a number between 1 and 65535", addr, port)
	}
	return transport.BaseURLScheme(scheme, net.JoinHostPort(host, port)), nil
}

// schemeOf is the scheme of a base URL.
func schemeOf(base string) string {
	if s, _, ok := strings.Cut(base, "://"); ok {
		return s
	}
	return transport.SchemeHTTP
}

// displayAddr strips the scheme from a base URL for messages.
func displayAddr(base string) string {
	return transport.HostPort(base)
}
