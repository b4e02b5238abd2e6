package client

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"jobmaster/transport"
)

// Defaults of a Client; see the options to change them.
const (
	// DefaultTimeout bounds one call, retries and failovers included, when
	// the caller's context has no earlier deadline.
	DefaultTimeout = 15 * time.Second
	// DefaultAttemptTimeout bounds one attempt of a retryable request at one
	// master, so that a hung master does not hold the call: after it the
	// client moves on to the next master. It exceeds the masters' 5 s wait
	// for a leader, so their 503 (not a timeout) is what the client sees.
	DefaultAttemptTimeout = 8 * time.Second
)

// Backoff between two rounds over every master.
const (
	initialBackoff = 100 * time.Millisecond
	maxBackoff     = time.Second
)

// Client talks to a cluster of masters. It is safe for concurrent use.
type Client struct {
	addrs          []string // base URLs, http(s)://host:port
	http           *http.Client
	own            *http.Client // closed by Close; nil with WithHTTPClient
	timeout        time.Duration
	attemptTimeout time.Duration
	backoff        time.Duration // first pause between rounds
	refusedFor     time.Duration // WithGiveUpWhenRefused
	notify         func(*UnreachableError)
	tls            transport.TLSFiles // WithCACert, WithClientCert
	stale          bool               // WithStaleReads
	token          string             // WithToken

	mu   sync.Mutex
	last int // index in addrs of the master that last answered
}

// Option changes a Client built by New.
type Option func(*Client)

// WithTimeout bounds every call (all its retries and failovers) to d. A
// deadline of the caller's context that comes earlier still applies. Zero or
// less means only the caller's context bounds a call.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// WithGiveUpWhenRefused ends a call once every master has refused the
// connection in every round for d: no process listens at any address (no
// cluster runs there, or the wrong addresses were given), which waiting
// seldom changes, while a master that restarts listens again within it.
// Zero (the default) retries until the timeout.
func WithGiveUpWhenRefused(d time.Duration) Option {
	return func(c *Client) { c.refusedFor = d }
}

// WithAttemptTimeout bounds one attempt of a retryable request (GET, PUT) at
// one master before the client tries the next. It does not apply to a POST,
// which is never resent once it may have been received.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *Client) { c.attemptTimeout = d }
}

// WithRetryNotify makes the Client call notify, on the calling goroutine,
// each time a round over every master has failed and the call is about to
// pause and try again; err tells what each master said. A CLI uses it to
// say that it is waiting for a cluster.
func WithRetryNotify(notify func(err *UnreachableError)) Option {
	return func(c *Client) { c.notify = notify }
}

// WithHTTPClient makes the Client send its requests through hc. Its Timeout
// should be zero: the Client bounds calls through contexts. hc brings its
// own TLS (transport.NewClient's), and its scheme is what host:port
// addresses take; WithCACert and WithClientCert then do nothing.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		c.http = hc
		c.own = nil
	}
}

// WithStaleReads makes every read of the state (jobs, a job, the cluster,
// a snapshot, the Raft peers) ask with ?stale: the master reached answers
// from its own replicated state, without a leader, so reads work while a
// majority of the masters is down. The answers may be behind the leader's.
func WithStaleReads() Option {
	return func(c *Client) { c.stale = true }
}

// readPath is the path of a read of the state, with ?stale when the client
// makes stale reads.
func (c *Client) readPath(path string) string {
	if !c.stale {
		return path
	}
	if strings.Contains(path, "?") {
		return path + "&stale"
	}
	return path + "?stale"
}

// WithCACert makes the Client trust the CA certificates in file (PEM) and
// reach the masters over https: "host:port" addresses become
// "https://host:port". Without it, an https:// address is verified against
// the system's roots.
func WithCACert(file string) Option {
	return func(c *Client) { c.tls.CA = file }
}

// WithClientCert makes the Client present the certificate in certFile (with
// its key in keyFile) to the masters and executors, and reach them over
// https, as WithCACert does.
func WithClientCert(certFile, keyFile string) Option {
	return func(c *Client) { c.tls.Cert, c.tls.Key = certFile, keyFile }
}

// WithToken makes the Client send the ACL token secret with every request
// to the masters (X-Jobmaster-Token). It is never sent to executors.
func WithToken(secret string) Option {
	return func(c *Client) { c.token = secret }
}

// New returns a Client for the masters in addresses, a comma-separated list
// of "host:port", "http://host:port" or "https://host:port" (see
// ParseAddresses). With WithCACert or WithClientCert, "host:port" means
// https; a CA or certificate file that cannot be read is an error.
func New(addresses string, opts ...Option) (*Client, error) {
	c := &Client{
		timeout:        DefaultTimeout,
		attemptTimeout: DefaultAttemptTimeout,
		backoff:        initialBackoff,
	}
	for _, opt := range opts {
		opt(c)
	}
	if c.http == nil {
		var tl *transport.TLS
		if c.tls.On() {
			var err error
			if tl, err = transport.LoadTLS(c.tls); err != nil {
				return nil, err
			}
		}
		// The client honours HTTP_PROXY and NO_PROXY, as other HTTP tools do.
		hc := transport.NewClient(transport.ClientOptions{EnvironmentProxy: true, TLS: tl})
		c.http, c.own = hc, hc
	}
	addrs, err := parseAddresses(addresses, transport.Scheme(c.http))
	if err != nil {
		c.Close()
		return nil, err
	}
	c.addrs = addrs
	return c, nil
}

// Addresses returns the masters' base URLs (http(s)://host:port) in list order.
func (c *Client) Addresses() []string {
	return append([]string(nil), c.addrs...)
}

// Close releases the Client's idle connections. The Client remains usable.
func (c *Client) Close() {
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
}

// first returns the index of the master to try first.
func (c *Client) first() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// answered records the master that gave the last usable answer, and the
// leader that master named (its api.LeaderHeader, "" for none): the next
// call starts at the leader when it is one of the client's addresses, else
// at the master that answered. A client that follows the leader saves its
// requests a forward.
func (c *Client) answered(i int, leader string) {
	next := i
	if leader != "" && transport.HostPort(c.addrs[i]) != leader {
		for k, a := range c.addrs {
			if transport.HostPort(a) == leader {
				next = k
				break
			}
		}
	}
	c.mu.Lock()
	c.last = next
	c.mu.Unlock()
}
