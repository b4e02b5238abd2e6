package master

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/transport"
)

// newRaftTransport is Raft's network transport: plain TCP without TLS (tl
// nil, tcpStream), else TCP under mutual TLS (tlsStream), where both ends
// must present a server's certificate. Either way, whenever a connection
// another master opened ends, closed is signalled (without blocking): a
// leader's connections end at once when its process dies, which is the
// succession watch's cue to probe it (succession.go).
func newRaftTransport(bind string, advertise net.Addr, tl *transport.TLS, cfg *raft.NetworkTransportConfig, closed chan<- struct{}) (*raft.NetworkTransport, error) {
	var s raft.StreamLayer
	var err error
	if tl == nil {
		s, err = newTCPStream(bind, advertise)
	} else {
		s, err = newTLSStream(bind, advertise, tl)
	}
	if err != nil {
		return nil, err
	}
	cfg.Stream = &watchedStream{StreamLayer: s, closed: closed}
	return raft.NewNetworkTransportWithConfig(cfg), nil
}

// tcpStream is a raft.StreamLayer over plain TCP.
type tcpStream struct {
	net.Listener
	advertise net.Addr
}

func newTCPStream(bind string, advertise net.Addr) (*tcpStream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft address %s cannot be advertised", advertise)
	}
	return &tcpStream{Listener: ln, advertise: advertise}, nil
}

// Addr is the advertised address.
func (s *tcpStream) Addr() net.Addr { return s.advertise }

// Dial connects to another master.
func (s *tcpStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// watchedStream is a stream layer whose accepted connections signal closed
// when a read on them fails (the peer closed it, or it broke).
type watchedStream struct {
	raft.StreamLayer
	closed chan<- struct{}
}

func (s *watchedStream) Accept() (net.Conn, error) {
	c, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, closed: s.closed}, nil
}

type watchedConn struct {
	net.Conn
	closed chan<- struct{}
	once   sync.Once
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && c.closed != nil {
		c.once.Do(func() {
			select {
			case c.closed <- struct{}{}:
			default:
			}
		})
	}
	return n, err
}

// raftHandshakeTimeout bounds the TLS handshake of a Raft connection, so
// that a peer that connects and stalls holds nothing for long.
const raftHandshakeTimeout = 5 * time.Second

// tlsStream is a raft.StreamLayer over TLS. Accepted connections require a
// server's certificate from a trusted CA (transport.ServerOnly); dialed
// ones present this master's and require the same of the peer, whose
// certificate must also cover the address dialed. Each handshake uses the
// TLS material current at that moment, so a reload applies to the next
// connection.
type tlsStream struct {
	net.Listener // yields *handshakeConn
	advertise    net.Addr
	tls          *transport.TLS
}

func newTLSStream(bind string, advertise net.Addr, tl *transport.TLS) (*tlsStream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft address %s cannot be advertised", advertise)
	}
	return &tlsStream{Listener: tls.NewListener(ln, tl.ServerConfig(true, transport.ServerOnly)), advertise: advertise, tls: tl}, nil
}

// Accept returns the next connection; its handshake runs on its first Read
// or Write (in Raft's goroutine for the connection, not in the accept
// loop), within raftHandshakeTimeout.
func (s *tlsStream) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: c.(*tls.Conn)}, nil
}

// Addr is the advertised address.
func (s *tlsStream) Addr() net.Addr { return s.advertise }

// Dial connects to another master and completes the handshake.
func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.tls.DialTLS(ctx, &net.Dialer{Timeout: timeout}, string(addr), transport.ServerOnly)
}

// handshakeConn is an accepted connection that completes its handshake,
// under a deadline, before its first Read or Write.
type handshakeConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		_ = c.Conn.SetDeadline(time.Now().Add(raftHandshakeTimeout))
		c.err = c.Conn.Handshake()
		if c.err == nil {
			c.err = c.Conn.SetDeadline(time.Time{})
		}
		switch {
		case errors.Is(c.err, io.EOF):
			// The peer hung up before it said anything: a probe of this
			// master's liveness (succession.go), not worth a log line.
			c.err = io.EOF
		case c.err != nil:
			c.err = errors.Join(errors.New("raft connection refused"), c.err)
		}
	})
	return c.err
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
