// Package transport is how jobmaster's roles speak HTTP to each other: the
// one client every role uses to reach its peers, the one way a role's HTTP
// server is set up, the URLs they dial, the JSON bodies they exchange, the
// size limits on those bodies, the errors a failed exchange becomes, and
// TLS (tls.go): the one place that builds a TLS configuration, for
// listeners and dials alike. Outside tests and test harnesses, nothing else
// in jobmaster builds an http.Client, a tls.Config or writes a scheme.
//
// # Vocabulary
//
//   - Role: a master, an executor, or the client (the CLI and anything
//     built on package client).
//   - Peer: the other end of an exchange. Masters are the peers of
//     executors, of other masters (forwarding) and of the client; executors
//     are the peers of masters and of the client (logs).
//   - Address: where a peer's HTTP server listens, as a role knows it:
//     "host:port", or, given by a user (package client), a base URL that
//     already carries a scheme ("http://host:port", a trailing slash
//     allowed). An address a peer gave (gossip, a report, a leader's
//     request) is a bare host:port (CheckPeerAddress) and is dialed with
//     PeerURL, which takes no scheme from it.
//   - Scheme: "https" for a client built with TLS, else "http" (Scheme). A
//     URL is built for the client that dials it, so TLS decides the scheme
//     in one place.
//   - Base URL: an address with its scheme, "https://host:port". URL
//     builds one from an address and appends a path.
//   - TLS material: a role's trusted CAs and, for a node, its certificate
//     and the identity it carries (package pki); reloadable, and read
//     afresh by every handshake.
//   - Peer check: what a connection requires of the identity in its peer's
//     certificate (NodePeer, ServerOnly); a server that needs a peer's
//     identity per request reads it with PeerIdentity.
//   - Request body / answer: what a role sends, and what its peer sends back.
//     Both are JSON except where an endpoint says otherwise (snapshots, logs).
//   - Error body: the JSON object {"error": "message"} that every error
//     answer carries.
//   - Limit: the most bytes a role reads of a body: MaxRequestBytes of a
//     request body (more is a 413), MaxResponseBytes of a peer's answer (more
//     is ErrTooLarge, unless the answer is an error anyway).
//   - Server bounds: what every role's server refuses to wait for or hold
//     (server.go): slow headers and bodies (ReadHeaderTimeout,
//     ReadTimeout), idle keep-alive connections, header blocks over
//     MaxHeaderBytes, and more connections from one client address than
//     MaxConnsPerClient.
//   - Drive-by request: one a web page makes a browser send (driveby.go):
//     a write whose body is not of its endpoint's type (CheckContentType,
//     415) or a request from another origin (CheckOrigin, 403).
//   - Status error: an answer whose status is not 2xx, as a *StatusError
//     carrying the status code and the peer's message. A server answers
//     its own request errors (413, 400) as the same type.
//
// Transport errors (no connection, a timeout) are returned as net/http
// returns them; callers that must tell them apart use errors.Is and
// errors.As on them, never the error's text.
package transport
