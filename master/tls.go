package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/exposure"
	"jobmaster/membership"
	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// A master's security (docs/security.md). With TLS on:
//   - the HTTP API is HTTPS; a peer's certificate is asked for but not
//     required (users are identified by tokens), and the internal endpoint
//     executors push to checks the certificate per request (authorizePush);
//   - Raft runs over mutual TLS between server certificates (raft_tls.go);
//   - every request this master sends (forwarding to the leader, deploy,
//     cancel, heartbeat and release to executors) is mutual TLS, and the
//     peer must present a server's or an executor's certificate;
//   - a master gossip names becomes a voter only once its Raft address
//     presents a server certificate for its node id (verifyServer).
//
// Without TLS, nothing is checked: on loopback, or with --insecure.

// loadSecurity loads the master's TLS (nil when off) and gossip keys, after
// deciding whether it may start with them where it listens (package
// exposure: it refuses, or logs a warning under --insecure).
func loadSecurity(cfg *Config) (*transport.TLS, [][]byte, error) {
	keys, err := membership.LoadKeys(cfg.GossipKeys, cfg.GossipKeyring)
	if err != nil {
		return nil, nil, err
	}
	v := exposure.Judge(exposure.Node{
		Role: "master",
		Addrs: []exposure.Addr{
			{Flag: "--http-addr", Value: cfg.HTTPAddr}, {Flag: "--raft-addr", Value: cfg.RaftAddr}, {Flag: "--gossip-addr", Value: cfg.GossipAddr},
		},
		TLS: cfg.TLS.On(), GossipKey: len(keys) > 0, ACL: cfg.ACL, NeedsACL: true, Insecure: cfg.Insecure,
	})
	if err := v.Err(); err != nil {
		return nil, nil, err
	}
	if w := v.Warning(); w != "" {
		cfg.Logger.Warn(w, "node", cfg.NodeID)
	}
	if !cfg.TLS.On() {
		return nil, keys, nil
	}
	if err := cfg.TLS.CheckNode(); err != nil {
		return nil, nil, err
	}
	tl, err := transport.LoadTLS(cfg.TLS)
	if err != nil {
		return nil, nil, err
	}
	if err := tl.CheckIdentity(pki.Identity{Role: pki.Server, NodeID: cfg.NodeID}); err != nil {
		return nil, nil, err
	}
	return tl, keys, nil
}

// Reload reads the TLS files and the gossip keyring file (--gossip-keyring)
// again, as SIGHUP asks: connections set up from then on use the new
// certificates and CAs, and gossip the new keys. What cannot be read, or
// would change the master's identity, is left as it was and returned as an
// error.
func (m *Master) Reload() error {
	var errs []error
	if m.tls != nil {
		if err := m.tls.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("TLS: %w", err))
			m.log.Error("TLS certificates not reloaded: the ones in use are kept", "err", err)
		} else {
			m.log.Info("TLS certificates reloaded", "expires", m.tls.NotAfter().UTC().Format(time.RFC3339))
		}
	}
	if m.cfg.GossipKeyring != "" {
		c, err := m.gossip.ReloadKeyring(m.cfg.GossipKeyring)
		if err != nil {
			errs = append(errs, fmt.Errorf("gossip keyring: %w", err))
			m.log.Error("gossip keyring not reloaded: the keys in use are kept", "err", err)
		} else {
			m.log.Info("gossip keyring reloaded", "installed", len(c.Install), "primary_changed", c.Use != nil, "removed", len(c.Remove))
		}
	}
	return errors.Join(errs...)
}

// errForbidden is wrapped by the errors that refuse a peer (403).
var errForbidden = errors.New("forbidden")

// authorizePush decides whether the peer of a push (POST
// /v1/internal/executor-update), which presented the certificate of peer
// (hasPeer false: none), may push a report of executor. With TLS on, only
// executor's own certificate may, or a master's, relaying the push of an
// executor it has admitted itself to the leader.
func authorizePush(peer pki.Identity, hasPeer bool, executor string) error {
	switch {
	case !hasPeer:
		return fmt.Errorf("%w: a push needs the certificate of the executor it reports for", errForbidden)
	case peer.Role == pki.Server:
		return nil
	case peer.Role == pki.Executor && peer.NodeID == executor:
		return nil
	case peer.Role == pki.Executor:
		return fmt.Errorf("%w: the certificate of executor %q cannot push for executor %q", errForbidden, peer.NodeID, executor)
	}
	return fmt.Errorf("%w: %s certificate cannot push for an executor", errForbidden, peer.Role.A())
}

// requirePusher guards the push endpoint with authorizePush, before the
// request is served or forwarded. Without TLS it guards nothing.
func (m *Master) requirePusher(next http.HandlerFunc) http.HandlerFunc {
	if m.tls == nil {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		peer, has := transport.PeerIdentity(r)
		if err := authorizePush(peer, has, pushedFor(r, peer, has, body)); err != nil {
			writeError(w, http.StatusForbidden, err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next(w, r)
	}
}

// pushedFor is the executor a push's body names, as far as authorizePush
// needs it: nothing for a peer whose certificate decides alone (none, or a
// master's), the name alone of a binary report. A malformed body names
// none (the handler refuses it anyway); a binary report of a revision
// this master does not read is let through to the handler, which refuses
// it (415) having done nothing, so that the executor sends it as JSON.
func pushedFor(r *http.Request, peer pki.Identity, hasPeer bool, body []byte) string {
	if !hasPeer || peer.Role != pki.Executor {
		return ""
	}
	if ct := r.Header.Get("Content-Type"); wire.IsBinary(ct) && !wire.IsReport(ct) {
		return peer.NodeID
	}
	return pushedName(r, body)
}

// requireServer guards an endpoint only masters call: with TLS on, the
// peer must present a server's certificate. Without TLS it guards nothing
// (on loopback, where a master may run without TLS, anyone may call it).
func (m *Master) requireServer(next http.HandlerFunc) http.HandlerFunc {
	if m.tls == nil {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if peer, ok := transport.PeerIdentity(r); !ok || peer.Role != pki.Server {
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s: only a master may call %s (it needs a server's certificate)", errForbidden, r.URL.Path))
			return
		}
		next(w, r)
	}
}

// admitVoter decides whether the certificate a Raft address presented,
// peer, makes its holder the master id: a server's certificate for that
// node id.
func admitVoter(id string, peer pki.Identity) error {
	if peer.Role != pki.Server || peer.NodeID != id {
		return fmt.Errorf("its Raft address presents the certificate of %s, not of server %s", peer, id)
	}
	return nil
}

// voterProbeTimeout bounds the TLS handshake of verifyServer.
const voterProbeTimeout = 3 * time.Second

// verifyServer checks, with TLS on, that the process at the Raft address
// addr holds a server certificate for id (admitVoter): it completes a TLS
// handshake there, presenting this master's certificate, and closes the
// connection. Gossip tells where a master is; only its certificate makes it
// one. Without TLS it checks nothing.
func (m *Master) verifyServer(id raft.ServerID, addr raft.ServerAddress) error {
	if m.tls == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), voterProbeTimeout)
	defer cancel()
	c, err := m.tls.DialTLS(ctx, &net.Dialer{}, string(addr), func(peer pki.Identity) error {
		return admitVoter(string(id), peer)
	})
	if err != nil {
		return fmt.Errorf("master %s at Raft address %s not verified: %w", id, addr, err)
	}
	return c.Close()
}

// verifyServers is verifyServer for every server but this master.
func (m *Master) verifyServers(servers []raft.Server) error {
	for _, s := range servers {
		if s.ID == raft.ServerID(m.cfg.NodeID) {
			continue
		}
		if err := m.verifyServer(s.ID, s.Address); err != nil {
			return err
		}
	}
	return nil
}
