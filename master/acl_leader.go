package master

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"jobmaster/acl"
	"jobmaster/fsm"
	"jobmaster/pki"
	"jobmaster/transport"
)

// A master that does not know a token may only be behind: a master that
// has just restarted applies what it missed once the leader's retries
// reach it (seconds), and a token created a moment ago may not have
// reached it yet. For a request it serves itself (a stale read, the event
// stream, its state hash, its metrics), it asks the leader for the token
// (tokenPath) rather than refuse a token the cluster has: the leader's
// answer stands here until this master has applied as far as the leader
// had when it answered (caller.vouchedUntil); from then on this master's
// own state decides, as for any token.

// tokenPath is the leader's endpoint that looks a token up for another
// master, by its secret's hash.
const tokenPath = "/v1/internal/acl-token"

const (
	// tokenAskTimeout bounds one question to the leader.
	tokenAskTimeout = 2 * time.Second
	// maxTokenAsks bounds the questions in flight: requests with unknown
	// tokens beyond it are answered 503 (errTokenAsksBusy), without asking.
	maxTokenAsks = 16
)

// tokenAnswer is the leader's answer: the token, and the index the leader
// had applied when it looked.
type tokenAnswer struct {
	Token tokenWire `json:"token"`
	Index uint64    `json:"index"`
}

// tokenWire is a token as the leader answers another master (its
// secret's hash, never the secret).
type tokenWire struct {
	AccessorID  string     `json:"accessor_id"`
	Name        string     `json:"name,omitempty"`
	Policy      acl.Policy `json:"policy"`
	SecretHash  string     `json:"secret_hash"`
	CreateIndex uint64     `json:"create_index"`
	CreateTime  int64      `json:"create_time_ms"`
}

func (t tokenWire) token() fsm.ACLToken {
	return fsm.ACLToken{AccessorID: t.AccessorID, Name: t.Name, Policy: t.Policy, SecretHash: t.SecretHash,
		CreateIndex: t.CreateIndex, CreateTime: t.CreateTime}
}

// tokenForPeer serves tokenPath on the leader: 200 with the token, 404
// for a hash no token has, 503 on a master that does not lead.
func (m *Master) tokenForPeer(w http.ResponseWriter, r *http.Request) {
	hash := r.URL.Query().Get("hash")
	if b, err := hex.DecodeString(hash); err != nil || len(b) != 32 {
		writeError(w, http.StatusBadRequest, "hash: want the hex SHA-256 of a token's secret (64 hex digits)")
		return
	}
	if m.currentSession() == nil {
		writeError(w, http.StatusServiceUnavailable, "this master does not lead")
		return
	}
	t, ok := m.lookupToken(hash)
	if !ok {
		writeError(w, http.StatusNotFound, "ACL token not found")
		return
	}
	writeJSON(w, http.StatusOK, tokenAnswer{Index: m.appliedIndex(), Token: tokenWire{AccessorID: t.AccessorID, Name: t.Name,
		Policy: t.Policy, SecretHash: t.SecretHash, CreateIndex: t.CreateIndex, CreateTime: t.CreateTime}})
}

// errTokenAsksBusy: this master may not ask the leader about another
// token now (maxTokenAsks are in flight).
var errTokenAsksBusy = errors.New("this master does not know the token yet and is asking the leader about as many as it may: retry shortly")

// tokenFromLeader asks the leader for the token whose secret hashes to
// hash. ok is false when this master leads, knows no leader, the leader
// said no since this master last applied an entry, the answer does not
// come from the master Raft names leader (with TLS: its server
// certificate), or the leader does not have the token or did not answer;
// busy when it may not ask now (maxTokenAsks).
func (m *Master) tokenFromLeader(ctx context.Context, hash string) (t fsm.ACLToken, until uint64, ok, busy bool) {
	if m.currentSession() != nil || m.leaderForTokens == nil {
		return fsm.ACLToken{}, 0, false, false
	}
	addr, leaderID := m.leaderForTokens()
	if addr == "" {
		return fsm.ACLToken{}, 0, false, false
	}
	applied := m.appliedIndex()
	if m.tokenRefusals.said(hash, applied) {
		return fsm.ACLToken{}, 0, false, false
	}
	select {
	case m.tokenAsks <- struct{}{}:
		defer func() { <-m.tokenAsks }()
	default:
		return fsm.ACLToken{}, 0, false, true
	}
	ctx, cancel := context.WithTimeout(ctx, tokenAskTimeout)
	defer cancel()
	u, err := transport.PeerURL(m.client, addr, tokenPath+"?hash="+url.QueryEscape(hash))
	if err != nil {
		m.log.Debug("not asking the leader for a token", "leader", leaderID, "err", err)
		return fsm.ACLToken{}, 0, false, false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fsm.ACLToken{}, 0, false, false
	}
	resp, err := m.client.Do(req)
	if err != nil {
		m.log.Debug("could not ask the leader for a token", "err", err)
		return fsm.ACLToken{}, 0, false, false
	}
	defer resp.Body.Close()
	if m.tls != nil {
		// Only the leader's word counts: gossip gave the address.
		var peer pki.Identity
		if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
			peer, err = pki.IdentityOf(resp.TLS.PeerCertificates[0])
		}
		if err != nil || peer.Role != pki.Server || peer.NodeID != leaderID {
			m.log.Warn("a question about a token was answered by another than the leader", "leader", leaderID, "addr", addr, "answered_by", peer.String())
			return fsm.ACLToken{}, 0, false, false
		}
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		m.tokenRefusals.note(hash, applied)
		return fsm.ACLToken{}, 0, false, false
	default:
		return fsm.ACLToken{}, 0, false, false
	}
	var a tokenAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&a); err != nil || a.Token.SecretHash != hash {
		m.log.Warn("the leader's answer about a token is not one", "err", err)
		return fsm.ACLToken{}, 0, false, false
	}
	return a.Token.token(), a.Index, true, false
}

// refusals remembers the tokens the leader said it does not have, and
// this master's applied index then: until this master applies another
// entry (which may create the token), the leader is not asked again about
// them. Bounded: it forgets everything when full.
type refusals struct {
	mu sync.Mutex
	at map[string]uint64
}

const maxRefusals = 1024

func (r *refusals) said(hash string, applied uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[hash]
	return ok && at == applied
}

func (r *refusals) note(hash string, applied uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil || len(r.at) >= maxRefusals {
		r.at = map[string]uint64{}
	}
	r.at[hash] = applied
}

// appliedIndex is the index of the state this master serves.
func (m *Master) appliedIndex() uint64 {
	var i uint64
	m.fsm.Read(func(st *fsm.State) { i = m.fsm.IndexOf(st) })
	return i
}
