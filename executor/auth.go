package executor

import (
	"fmt"
	"net/http"
	"path"
	"strings"

	"jobmaster/pki"
	"jobmaster/transport"
	"jobmaster/wire"
)

// Who may call which executor endpoint, with TLS on (docs/security.md). The
// executor's listener asks every peer for a certificate and verifies the one
// given; guard then admits a request by its path:
//
//	path                          peer certificate
//	/v1/internal/deploy           server (a master: only a leader's token moves the executor, fencing decides which)
//	/v1/internal/cancel           server
//	/v1/internal/heartbeat        server
//	/v1/internal/release          server
//	/v1/internal/partition        executor (another executor fetching a partition)
//	/v1/internal/ anything else   server: a new internal endpoint is a master's until this table says otherwise
//	/v1/executions, logs, ...     any certificate the cluster's CA issued (server, executor or client): users
//	                              read with a client certificate; tokens are the masters' to check, and are
//	                              never sent to an executor, which could otherwise replay them to the masters
//
// Without TLS every request is admitted, as before. In every mode, guard
// first refuses drive-by requests (transport.CheckOrigin,
// transport.CheckContentType): every body an executor takes is JSON.
var internalRoles = map[string]pki.Role{
	wire.PathDeploy:        pki.Server,
	wire.PathCancel:        pki.Server,
	wire.PathHeartbeat:     pki.Server,
	wire.PathRelease:       pki.Server,
	wire.PathPartitionData: pki.Executor,
}

// internalPrefix starts the path of every endpoint meant for other nodes.
const internalPrefix = "/v1/internal/"

// requiredRole is the role a request's peer must present for urlPath, and
// whether one is required at all.
func requiredRole(urlPath string) (pki.Role, bool) {
	p := path.Clean(urlPath)
	if r, ok := internalRoles[p]; ok {
		return r, true
	}
	if strings.HasPrefix(p+"/", internalPrefix) {
		return pki.Server, true
	}
	return "", false
}

// authorize decides whether a peer that presented peer (hasPeer false:
// no certificate, or one without an identity) may call the endpoint at
// urlPath, with TLS on; its error is the 403's message.
func authorize(urlPath string, peer pki.Identity, hasPeer bool) error {
	role, needed := requiredRole(urlPath)
	if !needed {
		if !hasPeer {
			return fmt.Errorf("this executor answers only peers with a certificate from the cluster's CA; none was presented (users read with a client certificate: jobmaster tls cert create --role client, then --client-cert and --client-key)")
		}
		return nil
	}
	return admitRole(role, peer, hasPeer)
}

// admitRole decides whether peer is of role.
func admitRole(role pki.Role, peer pki.Identity, hasPeer bool) error {
	switch {
	case !hasPeer:
		return fmt.Errorf("this endpoint needs %s certificate; none was presented", role.A())
	case peer.Role != role:
		return fmt.Errorf("this endpoint needs %s certificate; %s presented %s certificate", role.A(), peer.NodeID, peer.Role.A())
	}
	return nil
}

// guard refuses drive-by requests, and, with TLS on, applies authorize to
// every request; a request meant for another executor (wire.HeaderExecutor)
// gets 421.
func (e *Executor) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := transport.CheckOrigin(r); err != nil {
			jsonFormat.Reject(w, err)
			return
		}
		if err := transport.CheckContentType(r, bodyType(r)); err != nil {
			jsonFormat.Reject(w, err)
			return
		}
		if e.tls != nil {
			peer, ok := transport.PeerIdentity(r)
			if err := authorize(r.URL.Path, peer, ok); err != nil {
				writeError(w, http.StatusForbidden, err.Error())
				return
			}
		}
		if to := r.Header.Get(wire.HeaderExecutor); to != "" && to != e.cfg.NodeID {
			writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("this is executor %s, not %s: the leader has another executor's name for this address", e.cfg.NodeID, to))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bodyType is the media type of the body a request may carry: JSON, or
// for a deploy also binary (wire.BinaryType; serveDeploy tells them apart).
func bodyType(r *http.Request) string {
	if r.URL.Path == wire.PathDeploy && isBinary(r) {
		return wire.BinaryType
	}
	return transport.JSONType
}

// requireRole is the check of guard for one handler: with TLS on, a request
// whose peer certificate is not of role gets 403. guard already applies it
// to every path in internalRoles; a handler served elsewhere that needs a
// node's identity wraps itself with it.
func (e *Executor) requireRole(role pki.Role, h http.HandlerFunc) http.HandlerFunc {
	if e.tls == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		peer, ok := transport.PeerIdentity(r)
		if err := admitRole(role, peer, ok); err != nil {
			writeError(w, http.StatusForbidden, err.Error())
			return
		}
		h(w, r)
	}
}
