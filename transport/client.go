package transport

import (
	"context"
	"net"
	"net/http"
	"time"

	"jobmaster/api"
)

// Defaults of ClientOptions' zero fields: those of Go's default transport.
const (
	DefaultDialTimeout         = 30 * time.Second
	DefaultIdleConnTimeout     = 90 * time.Second
	DefaultMaxIdleConnsPerHost = 2
	// keepAlive is the interval of TCP keep-alive probes on every
	// connection.
	keepAlive = 30 * time.Second
	// MaxResponseHeaderBytes bounds the header block of an answer a
	// client reads (Go's default is 10 MB); a larger one fails the
	// request. A node's answers carry a few hundred bytes of headers.
	MaxResponseHeaderBytes = 64 << 10
)

// ClientOptions shapes the client of one role. The zero value is a client
// with Go's default connection handling, no overall timeout, no proxy and
// no TLS.
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
	// TLS makes the client dial https (Scheme): every connection verifies
	// its peer with the material of TLS current when it is set up, and
	// presents TLS's certificate if it has one. A request through a proxy
	// (EnvironmentProxy) uses the material as it was when the client was
	// built. Nil: plain HTTP.
	TLS *TLS
	// PeerCheck, with TLS, decides which identities the client's peers may
	// present (NodePeer for a node's client); nil admits any certificate
	// the trusted CAs vouch for.
	PeerCheck PeerCheck
	// Token, when set, is the ACL token secret sent with every request
	// (TokenHeader) that does not carry one already.
	Token string
}

// TokenHeader is the header of a request's ACL token (api.TokenHeader).
const TokenHeader = api.TokenHeader

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
	dialer := &net.Dialer{Timeout: dial, KeepAlive: keepAlive}
	tr := &http.Transport{
		DialContext:            dialer.DialContext,
		MaxIdleConnsPerHost:    perHost,
		IdleConnTimeout:        idle,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
	if o.EnvironmentProxy {
		tr.Proxy = http.ProxyFromEnvironment
	}
	if t := o.TLS; t != nil {
		check := o.PeerCheck
		tr.DialTLSContext = func(ctx context.Context, _, addr string) (net.Conn, error) {
			return t.DialTLS(ctx, dialer, addr, check)
		}
		// Only for requests through a proxy; http.Transport names the host
		// on its copy of this configuration.
		tr.TLSClientConfig = t.clientConfig("", check)
		tr.TLSHandshakeTimeout = dial
	}
	var rt http.RoundTripper = tr
	if o.Token != "" {
		rt = &tokenTransport{Transport: tr, token: o.Token}
	}
	return &http.Client{Transport: rt, Timeout: o.Timeout, CheckRedirect: noRedirects}
}

// noRedirects: a redirect is answered as it is, never followed. No node
// redirects another, and a peer that did (an executor's certificate is
// enough to answer a deploy) would have the request sent again, commands,
// env and token with it, to wherever it named, in the clear if it said
// http (Go keeps a custom token header across hosts).
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// tokenTransport sends a token with every request.
type tokenTransport struct {
	*http.Transport
	token string
}

func (t *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get(TokenHeader) == "" {
		r = r.Clone(r.Context())
		r.Header.Set(TokenHeader, t.token)
	}
	return t.Transport.RoundTrip(r)
}

// Scheme is the scheme of every URL c dials: "https" for a client built
// with TLS (ClientOptions.TLS), else "http".
func Scheme(c *http.Client) string {
	tr, ok := c.Transport.(*http.Transport)
	if tt, isToken := c.Transport.(*tokenTransport); isToken {
		tr, ok = tt.Transport, true
	}
	if ok && (tr.DialTLSContext != nil || tr.TLSClientConfig != nil) {
		return SchemeHTTPS
	}
	return SchemeHTTP
}
