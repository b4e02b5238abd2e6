package transport

import "net/http"

// NewServerSeenFrom is NewServer whose connection bound counts every
// connection as one from client address from: tests connect over
// loopback, which is not bounded.
func NewServerSeenFrom(h http.Handler, o ServerOptions, from string) *http.Server {
	srv, l := newServer(h, o)
	l.seenFrom = from
	return srv
}
