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
// "http://host:port".
var baseForm = transport.BaseURLScheme(transport.SchemeHTTP, "host:port")

// ParseAddresses turns a comma-separated list of master HTTP addresses, each
// "host:port" or "http://host:port", into base URLs ("http://host:port"), in
// order and without duplicates. Blanks around entries and empty entries are
// ignored; anything else that is not such an address is an error.
func ParseAddresses(list string) ([]string, error) {
	var out []string
	seen := make(map[string]bool)
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		base, err := ParseAddress(part)
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

// ParseAddress turns one address, "host:port" or "http://host:port" (a
// trailing slash is allowed), into its base URL "http://host:port".
func ParseAddress(addr string) (string, error) {
	hostport := addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return "", fmt.Errorf("invalid address %q: %v", addr, err)
		}
		if u.Scheme != transport.SchemeHTTP {
			return "", fmt.Errorf("invalid address %q: scheme %q is not supported, use %s or host:port", addr, u.Scheme, baseForm)
		}
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
	return transport.BaseURLScheme(transport.SchemeHTTP, net.JoinHostPort(host, port)), nil
}

// displayAddr strips the scheme from a base URL for messages.
func displayAddr(base string) string {
	return transport.HostPort(base)
}
