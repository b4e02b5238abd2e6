package transport

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ReadHeaderTimeout bounds how long a server waits for a request's headers,
// so that a peer that connects and sends nothing does not hold a
// connection for ever.
const ReadHeaderTimeout = 10 * time.Second

// ServerOptions shapes the HTTP server of one role.
type ServerOptions struct {
	// IdleTimeout closes a keep-alive connection that has carried no
	// request for this long. Zero: an idle connection stays open until the
	// peer closes it.
	IdleTimeout time.Duration
	// Logger receives the server's own errors (a malformed request, a
	// connection that failed before a handler ran) at debug level. Nil:
	// they go to the standard logger, as net/http does by default.
	Logger *slog.Logger
	// TLS makes the server serve HTTPS with TLS's certificate. It asks
	// every peer for a certificate and verifies the one given, but admits
	// a peer without one: handlers that need a peer's identity check it
	// per request (PeerIdentity). A plain HTTP request is answered 400 and
	// served nothing. Nil: plain HTTP.
	TLS *TLS
}

// NewServer returns the HTTP server of a role, serving h. Start it with
// Serve.
func NewServer(h http.Handler, o ServerOptions) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
	}
	if o.Logger != nil {
		srv.ErrorLog = slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)
	}
	if o.TLS != nil {
		srv.TLSConfig = o.TLS.ServerConfig(false, nil)
	}
	return srv
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
