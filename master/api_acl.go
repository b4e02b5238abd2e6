package master

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"jobmaster/acl"
	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/strictjson"
)

// The ACL endpoints (docs/api.md, "ACL endpoints"): the bootstrap, and the
// tokens of a management token's holder.
func (m *Master) aclRoutes(rt *router) {
	rt.handle("/v1/acl/bootstrap", map[string]http.HandlerFunc{
		http.MethodPost: m.withSecret(m.bootstrapACL),
	})
	rt.handle("/v1/acl/tokens", map[string]http.HandlerFunc{
		http.MethodGet:  m.leaderRead(m.listTokens),
		http.MethodPost: m.withSecret(m.createToken),
	})
	rt.handle("/v1/acl/tokens/{accessor}", map[string]http.HandlerFunc{
		http.MethodDelete: m.leaderWrite(m.deleteToken),
	})
}

// MaxTokens bounds how many tokens the state holds; a creation beyond it
// is answered 429.
const MaxTokens = 10_000

// errACLOff answers the ACL endpoints of a master without --acl.
const errACLOff = "ACLs are off on this master: start every master with --acl to use tokens"

// tokenBody is the body of a bootstrap or a token creation: the public
// fields (api.ACLTokenRequest) of which the bootstrap takes the secret
// only.
type tokenBody = api.ACLTokenRequest

// withSecret serves a request that creates a token: its secret is chosen
// here, on the master that took the request, before it goes to the leader
// (as POST /v1/jobs chooses its id). The secret is written into the body
// the leader gets, and the token's accessor id derives from it, so a
// request the masters must try again at the next leader creates the same
// token, once, and answers with it.
func (m *Master) withSecret(h leaderHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		if !m.cfg.ACL {
			writeError(w, http.StatusBadRequest, errACLOff)
			return
		}
		var req tokenBody
		if b := bytes.TrimSpace(body); len(b) > 0 && string(b) != "null" { // null: no body
			if err := strictjson.Body(body, &req, "token request"); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
		}
		if req.SecretID == "" {
			req.SecretID = newSecret()
		} else if err := checkSecret(req.SecretID); err != nil {
			writeError(w, http.StatusBadRequest, "secret_id: "+err.Error())
			return
		}
		body, _ = json.Marshal(req)
		r.Header.Set("Content-Type", "application/json") // for a forward
		m.onLeader(w, r, body, h)
	}
}

// bootstrapACL: POST /v1/acl/bootstrap creates the first management token,
// once (409 afterwards).
func (m *Master) bootstrapACL(w http.ResponseWriter, r *http.Request, body []byte, s *session) error {
	var req tokenBody
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	if req.Name != "" || req.Policy != "" {
		writeError(w, http.StatusBadRequest, "the bootstrap token is the management token \"bootstrap\": its body may name a secret_id only")
		return nil
	}
	t := newToken(req.SecretID, "bootstrap", acl.Management)
	// Once bootstrapped, the answer is the state's: no Raft entry for a
	// request anyone may send without a token.
	var res fsm.Result
	var err error
	bootstrapped := false
	m.fsm.Read(func(st *fsm.State) {
		if bootstrapped = st.ACLBootstrapped(); bootstrapped {
			err = st.RebootstrapACL(t)
		}
	})
	if !bootstrapped {
		res, err = m.prop.ProposeOne(r.Context(), &fsm.BootstrapACL{Fenced: s.fenced(), ACLToken: t})
	}
	switch {
	case errors.Is(err, fsm.ErrACLBootstrapped) || errors.Is(err, fsm.ErrTokenExists):
		writeError(w, http.StatusConflict, "ACLs are already bootstrapped: the management token was handed out once; ask its holder for a token (jobmaster acl token create)")
		return nil
	case err != nil:
		return err
	}
	if res.Created {
		m.audit(r, "acl bootstrap", "new_accessor", t.AccessorID)
	}
	writeJSON(w, http.StatusCreated, tokenDoc(t, req.SecretID))
	return nil
}

// createToken: POST /v1/acl/tokens {"name", "policy"} creates a token.
func (m *Master) createToken(w http.ResponseWriter, r *http.Request, body []byte, s *session) error {
	var req tokenBody
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	p, err := acl.ParsePolicy(req.Policy)
	if err != nil {
		writeError(w, http.StatusBadRequest, "policy: "+err.Error())
		return nil
	}
	if err := fsm.CheckTokenName(req.Name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error()) // "invalid token: name ..."
		return nil
	}
	t := newToken(req.SecretID, req.Name, p)
	var n int
	var exists bool
	m.fsm.Read(func(st *fsm.State) {
		n = st.NumTokens()
		_, exists = st.TokenBySecretHash(t.SecretHash)
	})
	if !exists && n >= MaxTokens {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("quota reached: the cluster holds %d tokens, the most it keeps; delete unused ones (jobmaster acl token list, acl token delete)", n))
		return nil
	}
	res, err := m.prop.ProposeOne(r.Context(), &fsm.CreateACLToken{Fenced: s.fenced(), ACLToken: t})
	switch {
	case errors.Is(err, fsm.ErrTokenExists):
		writeError(w, http.StatusConflict, "a token with this secret exists with another name or policy")
		return nil
	case err != nil:
		return err
	}
	if res.Created {
		m.audit(r, "acl token create", "new_accessor", t.AccessorID, "new_name", t.Name, "new_policy", t.Policy)
	}
	writeJSON(w, http.StatusCreated, tokenDoc(t, req.SecretID))
	return nil
}

// listTokens: GET /v1/acl/tokens lists every token, never its secret.
func (m *Master) listTokens(w http.ResponseWriter, _ *http.Request, _ []byte, _ *session) error {
	if !m.cfg.ACL {
		writeError(w, http.StatusBadRequest, errACLOff)
		return nil
	}
	var ts []fsm.ACLToken
	m.fsm.Read(func(st *fsm.State) { ts = st.Tokens() })
	out := api.ACLTokenList{Tokens: make([]api.ACLToken, 0, len(ts))}
	for _, t := range ts {
		out.Tokens = append(out.Tokens, tokenDoc(t, ""))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteToken: DELETE /v1/acl/tokens/{accessor}.
func (m *Master) deleteToken(w http.ResponseWriter, r *http.Request, _ []byte, s *session) error {
	if !m.cfg.ACL {
		writeError(w, http.StatusBadRequest, errACLOff)
		return nil
	}
	id := r.PathValue("accessor")
	if fsm.CheckAccessorID(id) != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no token with accessor id %q", strictjson.Short(id)))
		return nil // nothing proposed for an id no token can have
	}
	_, err := m.prop.ProposeOne(r.Context(), &fsm.DeleteACLToken{Fenced: s.fenced(), AccessorID: id})
	switch {
	case errors.Is(err, fsm.ErrTokenNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no token with accessor id %q", id))
		return nil
	case errors.Is(err, fsm.ErrLastManagementToken):
		writeError(w, http.StatusConflict, "this is the last management token: create another one before deleting it, or the cluster has no way in")
		return nil
	case err != nil:
		return err
	}
	m.audit(r, "acl token delete", "deleted_accessor", id)
	writeJSON(w, http.StatusOK, api.ACLTokenDeleted{Deleted: id})
	return nil
}

// newToken is the token of a secret: its hash, and the accessor id that
// derives from it.
func newToken(secret, name string, p acl.Policy) fsm.ACLToken {
	return fsm.ACLToken{AccessorID: accessorOf(secret), Name: name, Policy: p, SecretHash: secretHash(secret)}
}

func tokenDoc(t fsm.ACLToken, secret string) api.ACLToken {
	return api.ACLToken{AccessorID: t.AccessorID, SecretID: secret, Name: t.Name, Policy: string(t.Policy)}
}

// newSecret is a random secret: a UUID (122 random bits).
func newSecret() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

// accessorOf derives a token's accessor id from its secret: one-way (a
// SHA-256 that is not the secret's hash the state keeps), so that
// listing accessors gives nothing away, and fixed, so that a retried
// creation names the same token.
func accessorOf(secret string) string {
	sum := sha256.Sum256([]byte("jobmaster accessor\x00" + secret))
	var b [16]byte
	copy(b[:], sum[:16])
	b[6] = b[6]&0x0f | 0x80 // UUID version 8: custom
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

func formatUUID(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// checkSecret validates a secret a caller chose: 16 to 128 characters
// that a header carries as they are.
func checkSecret(s string) error {
	if len(s) < 16 || len(s) > 128 {
		return fmt.Errorf("must have 16 to 128 characters, has %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		switch c {
		case '-', '.', '_', '~', '+', '/', '=':
			ok = true
		}
		if !ok {
			return fmt.Errorf("the character %q is not allowed: use letters, digits and -._~+/=", c)
		}
	}
	return nil
}
