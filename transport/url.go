package transport

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
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
// query) at the peer at addr, as c dials it (BaseURL). An address a peer
// gave is dialed with PeerURL instead, which takes no scheme from it.
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

// ErrPeerAddress is wrapped by the error of an address a peer gave
// (gossip, a report, a leader's request) that is not a bare "host:port"
// (CheckPeerAddress).
var ErrPeerAddress = errors.New("not a peer address")

// CheckPeerAddress checks an address a peer gave for itself or another
// peer: "host:port" and nothing more, with a port 1-65535 in decimal and a
// host that is an IP address (IPv6 in brackets), a name of letters,
// digits, '.', '-' and '_', or empty (the dialer's own host).
// Whatever else it might carry would change how it is dialed: a scheme
// ("http://"), which would have a TLS node dial it in the clear, a user,
// a path. Its errors wrap ErrPeerAddress.
func CheckPeerAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if strings.Contains(addr, "://") {
			return fmt.Errorf("%w: %q carries a scheme; a peer's address is host:port, and the scheme is the dialer's (https under TLS)", ErrPeerAddress, addr)
		}
		return fmt.Errorf("%w: %q is not host:port: %w", ErrPeerAddress, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strings.Trim(port, "0123456789") != "" {
		return fmt.Errorf("%w: %q: port %q is not a number 1-65535", ErrPeerAddress, addr, port)
	}
	if !validHost(host) {
		return fmt.Errorf("%w: %q: host %q is neither an IP address nor a name of letters, digits, '.', '-' and '_'", ErrPeerAddress, addr, host)
	}
	return nil
}

// validHost accepts an empty host, an IP address or a name of
// [A-Za-z0-9._-]. An IPv6 address with a zone ("fe80::1%eth0") is
// refused: in a URL its '%' reads as an escape, so it was never dialed.
func validHost(host string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Zone() == ""
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
		if !ok {
			return false
		}
	}
	return true
}

// PeerURL is URL for an address a peer gave: the scheme is c's alone
// (Scheme), and an address that is not a bare host:port
// (CheckPeerAddress), one carrying a scheme above all, is an error
// wrapping ErrPeerAddress. Every URL a master or an executor builds to
// dial another node is a PeerURL; URL, which keeps a scheme the address
// carries, is for the addresses a user gives (package client).
func PeerURL(c *http.Client, addr, path string) (string, error) {
	if err := CheckPeerAddress(addr); err != nil {
		return "", err
	}
	return Scheme(c) + "://" + addr + path, nil
}
