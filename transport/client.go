package transport

import (
	"net"
	"net/http"
	"time"
)

// Defaults of ClientOptions' zero fields: those of Go's default transport.
const (
	DefaultDialTimeout         = 30 * time.Second
	DefaultIdleConnTimeout     = 90 * time.Second
	DefaultMaxIdleConnsPerHost = 2
	// keepAlive is the interval of TCP keep-alive probes on every
	// connection.
	keepAlive = 30 * time.Second
)

// ClientOptions shapes the client of one role. The zero value is a client
// with Go's default connection handling, no overall timeout, and no proxy.
// The TLS configuration of later rounds belongs here too, so that every
// role's connections get it from this one place.
type ClientOptions struct {
	// Timeout bounds a whole exchange, reading the answer included
	// (http.Client.Timeout). Zero: only the request's context bounds it.
	Timeout time.Duration
	// DialTimeout bounds setting up one connection; zero is
	// DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxIdleConnsPerHost is how many idle keep-alive connections are kept
	// to one peer; zero is DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes a keep-alive connection idle for this long;
	// zero is DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
	// EnvironmentProxy sends requests through the proxy that HTTP_PROXY,
	// HTTPS_PROXY and NO_PROXY name (never for loopback addresses). Without
	// it requests go straight to the peer.
	EnvironmentProxy bool
}

// NewClient returns the *http.Client a role talks to its peers with. It
// owns its connections: CloseIdleConnections on it releases them.
func NewClient(o ClientOptions) *http.Client {
	dial := o.DialTimeout
	if dial <= 0 {
		dial = DefaultDialTimeout
	}
	perHost := o.MaxIdleConnsPerHost
	if perHost <= 0 {
		perHost = DefaultMaxIdleConnsPerHost
	}
	idle := o.IdleConnTimeout
	if idle <= 0 {
		idle = DefaultIdleConnTimeout
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: dial, KeepAlive: keepAlive}).DialContext,
		MaxIdleConnsPerHost: perHost,
		IdleConnTimeout:     idle,
	}
	if o.EnvironmentProxy {
		tr.Proxy = http.ProxyFromEnvironment
	}
	return &http.Client{Transport: tr, Timeout: o.Timeout}
}
