package master

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// The places of the log reads a master relays at once (api_logs.go): at
// most maxLogRelays in all (more are answered 503: another master may have
// room), and maxLogRelaysPerCaller per caller (more are answered 429), so
// that one caller cannot take them all. A caller is its token, by accessor
// id, with ACLs on, else its IP address.

// relayCaller is who a relay counts against: key, and name, as an answer
// names it.
type relayCaller struct {
	key, name string
}

// relayCallerOf is the caller of a log read: c's token when it has one
// (ACLs on), else the IP address of remoteAddr (host:port, as
// http.Request.RemoteAddr has it); an IPv6 address counts as its /64
// network, which one host is commonly given whole (counted by address,
// one such host could take every relay).
func relayCallerOf(c *caller, remoteAddr string) relayCaller {
	if c != nil && c.token.AccessorID != "" {
		return relayCaller{key: "token " + c.token.AccessorID,
			name: fmt.Sprintf("token %q (accessor %s)", c.token.Name, c.token.AccessorID)}
	}
	host := remoteAddr
	if ap, err := netip.ParseAddrPort(remoteAddr); err == nil {
		host = ap.Addr().Unmap().WithZone("").String()
		if a := ap.Addr().Unmap(); a.Is6() {
			p, _ := a.WithZone("").Prefix(64)
			host = p.String()
		}
	} else if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	return relayCaller{key: "address " + host, name: "client " + host}
}

// relayRefusal decides whether a log read of who may be relayed, on master
// node relaying total reads, mine of them who's: status 0 if so, else the
// answer.
func relayRefusal(node string, who relayCaller, mine, total, perCaller, most int) (int, string) {
	switch {
	case mine >= perCaller:
		return http.StatusTooManyRequests, fmt.Sprintf("%s has %d log reads relayed by master %s already, the most one caller may have at once: end one (a followed log lasts until its task ends), or retry shortly", who.name, mine, node)
	case total >= most:
		return http.StatusServiceUnavailable, fmt.Sprintf("master %s relays %d logs already, the most it relays at once: retry shortly, or ask another master", node, total)
	}
	return 0, ""
}

// logRelays counts the log reads a master relays, in all and per caller.
type logRelays struct {
	most, perCaller int

	mu    sync.Mutex
	total int
	per   map[string]int
}

func newLogRelays(most, perCaller int) *logRelays {
	return &logRelays{most: most, perCaller: perCaller, per: map[string]int{}}
}

// take holds a place for a read of who on master node, and returns what
// gives it back; or, when relayRefusal refuses it, the answer.
func (l *logRelays) take(node string, who relayCaller) (release func(), status int, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if status, msg := relayRefusal(node, who, l.per[who.key], l.total, l.perCaller, l.most); status != 0 {
		return nil, status, msg
	}
	l.total++
	l.per[who.key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.per[who.key]--; l.per[who.key] == 0 {
				delete(l.per, who.key)
			}
		})
	}, 0, ""
}
