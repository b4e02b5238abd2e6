package transport

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Bounds of every role's HTTP server (docs/security.md, "Bounds").
const (
	// ReadHeaderTimeout bounds how long a server waits for a request's
	// headers, so that a peer that connects and sends nothing does not hold
	// a connection for ever.
	ReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included: a
	// peer that trickles a body holds its connection no longer. Once the
	// body is read the deadline no longer applies (net/http lifts it), so
	// answers may stream for as long as they need; a handler that takes a
	// body larger than a minute can carry (a snapshot restore) lifts it
	// with Unbounded.
	DefaultReadTimeout = time.Minute
	// DefaultIdleTimeout closes a keep-alive connection that has carried no
	// request for this long.
	DefaultIdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds a request's header block (its request line
	// included); a larger one is answered 431.
	MaxHeaderBytes = 64 << 10
	// DefaultMaxConnsPerClient is how many connections one client address
	// may hold open to a server at once (Nomad's http_max_conns_per_client
	// has the same default). Loopback clients are not counted.
	DefaultMaxConnsPerClient = 100
)

// ServerOptions shapes the HTTP server of one role.
type ServerOptions struct {
	// ReadTimeout bounds reading a request, body included (see
	// DefaultReadTimeout, its value when zero).
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that has carried no
	// request for this long; zero is DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxConnsPerClient bounds the connections one client IP may hold open
	// at once: a connection beyond it is closed as soon as it is accepted,
	// and the refusal logged. Connections from loopback addresses are not
	// counted (a local process can exhaust the host anyway, and the nodes
	// of a test or dev cluster share 127.0.0.1), nor, with TLS, those whose
	// peer presented a master's or an executor's certificate, once its
	// handshake is done. Zero is DefaultMaxConnsPerClient; negative, no
	// bound.
	MaxConnsPerClient int
	// Logger receives the server's own errors (a malformed request, a
	// connection that failed before a handler ran) at debug level, and
	// refused connections at warn level (at most one line per client
	// address and refusalLogEvery). Nil: errors go to the standard logger,
	// as net/http does by default, and refusals to slog's default.
	Logger *slog.Logger
	// TLS makes the server serve HTTPS with TLS's certificate. It asks
	// every peer for a certificate and verifies the one given, but admits
	// a peer without one: handlers that need a peer's identity check it
	// per request (PeerIdentity). A plain HTTP request is answered 400 and
	// served nothing. Nil: plain HTTP.
	TLS *TLS
	// Now is the clock of the refusal log's throttle; nil is time.Now.
	Now func() time.Time
}

// NewServer returns the HTTP server of a role, serving h. Start it with
// Serve. It has no WriteTimeout: answers that stream (a snapshot, a
// partition followed while it is written, logs) last as long as they need,
// and the peer's TCP keep-alives find one that went away.
func NewServer(h http.Handler, o ServerOptions) *http.Server {
	srv, _ := newServer(h, o)
	return srv
}

// newServer is NewServer, with its connection limiter (nil: unbounded).
func newServer(h http.Handler, o ServerOptions) (*http.Server, *connLimiter) {
	read := o.ReadTimeout
	if read <= 0 {
		read = DefaultReadTimeout
	}
	idle := o.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       read,
		IdleTimeout:       idle,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
	if o.Logger != nil {
		srv.ErrorLog = slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)
	}
	perClient := o.MaxConnsPerClient
	if perClient == 0 {
		perClient = DefaultMaxConnsPerClient
	}
	var limiter *connLimiter
	if perClient > 0 {
		limiter = newConnLimiter(perClient, o.Logger, o.Now)
		srv.ConnState = limiter.track
	}
	if o.TLS != nil {
		// A peer that proves a node's identity (a master, an executor) is
		// not bounded: an executor's consumers hold a connection per
		// pipelined source they follow, which a wide job between two
		// hosts takes past any bound made for clients.
		var node func(net.Conn)
		if limiter != nil {
			node = limiter.exempt
		}
		srv.TLSConfig = o.TLS.serverConfig(false, nil, node)
	}
	return srv, limiter
}

// Serve serves srv on ln until srv is shut down or closed, after which it
// returns nil; any other end is its error. A server NewServer built with
// TLS serves HTTPS.
func Serve(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Unbounded lifts the server's read deadline from the request w answers,
// for a handler whose request body may take longer than the server's
// ReadTimeout to arrive (a snapshot restore): without it the body's read
// fails when the deadline passes. The handler bounds itself instead (a
// size limit, its context). Answers need no such thing: the deadline
// covers reading the request only, and net/http lifts it once the body is
// read, so a stream (a snapshot download, a partition followed while its
// producer writes it, an event stream) is not cut by it. It returns the
// error of a ResponseWriter that cannot lift deadlines
// (http.ErrNotSupported), which callers may ignore.
func Unbounded(w http.ResponseWriter) error {
	return http.NewResponseController(w).SetReadDeadline(time.Time{})
}
