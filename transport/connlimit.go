package transport

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// refusalLogEvery throttles the log of refused connections: at most one
// line per client address this often, with the count refused since.
const refusalLogEvery = 10 * time.Second

// connLimiter bounds the connections each client address holds open to one
// server (ServerOptions.MaxConnsPerClient), through the server's ConnState
// hook: a new connection over the bound is closed before anything is read
// from it. A connection whose TLS peer proves a node's identity stops
// counting once its handshake is done (exempt): a node's connections stop
// taking room, while those without a node's certificate keep theirs. (A
// node's connections count until their handshakes are done, so a burst of
// more than the bound at once may see some refused; its fetches retry.)
type connLimiter struct {
	max int
	log *slog.Logger
	now func() time.Time
	// seenFrom, when set, is the client address every connection counts
	// as (tests: loopback, which they connect over, is not bounded).
	seenFrom string

	mu      sync.Mutex
	open    map[string]int      // client address -> connections counted
	counted map[net.Conn]string // the connections counted (the TCP ones, under TLS) -> client address
	refused map[string]refusals
}

// refusals is the throttle state of one client address's log lines.
type refusals struct {
	logged time.Time
	since  int // refused since the last line
}

func newConnLimiter(max int, log *slog.Logger, now func() time.Time) *connLimiter {
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	return &connLimiter{max: max, log: log, now: now, open: make(map[string]int),
		counted: make(map[net.Conn]string), refused: make(map[string]refusals)}
}

// admit decides whether a client address holding open connections may
// open one more under a bound of max. Loopback clients are not bounded.
func admit(ip net.IP, open, max int) bool {
	return ip.IsLoopback() || open < max
}

// clientIP is the address of a connection's peer, without its port.
func clientIP(c net.Conn) (string, net.IP) {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		host = c.RemoteAddr().String()
	}
	return host, net.ParseIP(host)
}

// track is the server's ConnState hook.
func (l *connLimiter) track(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		host, ip := clientIP(c)
		if l.seenFrom != "" {
			host, ip = l.seenFrom, net.ParseIP(l.seenFrom)
		}
		l.mu.Lock()
		if !admit(ip, l.open[host], l.max) {
			line, n := l.throttle(host)
			l.mu.Unlock()
			_ = c.Close()
			if line {
				l.log.Warn("connection refused: the client holds the most connections one client may",
					"client", host, "max_conns_per_client", l.max, "refused", n)
			}
			return
		}
		if ip.IsLoopback() {
			l.mu.Unlock()
			return
		}
		l.open[host]++
		l.counted[rawConn(c)] = host
		l.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		l.uncount(rawConn(c))
	}
}

// rawConn is the TCP connection under a TLS one: the one a TLS handshake
// callback knows (tls.ClientHelloInfo.Conn).
func rawConn(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}

// exempt stops counting connection c (the TCP connection): its peer
// proved a node's identity.
func (l *connLimiter) exempt(c net.Conn) { l.uncount(c) }

// uncount stops counting connection c (raw), if it is counted.
func (l *connLimiter) uncount(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if host, ok := l.counted[c]; ok {
		delete(l.counted, c)
		if l.open[host]--; l.open[host] <= 0 {
			delete(l.open, host)
		}
	}
}

// throttle counts a refusal of host and says whether to log it now, with
// how many refusals the line stands for. Called with l.mu held.
func (l *connLimiter) throttle(host string) (bool, int) {
	r := l.refused[host]
	r.since++
	now := l.now()
	if !r.logged.IsZero() && now.Sub(r.logged) < refusalLogEvery {
		l.refused[host] = r
		return false, 0
	}
	n := r.since
	l.refused[host] = refusals{logged: now}
	if len(l.refused) > 10000 { // many addresses: forget the oldest lines' state
		for h, x := range l.refused {
			if now.Sub(x.logged) >= refusalLogEvery {
				delete(l.refused, h)
			}
		}
	}
	return true, n
}
