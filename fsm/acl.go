package fsm

import (
	"errors"
	"fmt"
	"sort"
	"unicode"
	"unicode/utf8"

	"jobmaster/acl"
)

// ACL tokens (package acl decides what a policy allows). The state keeps
// each token's accessor id (public: it names the token in lists and
// deletes), its name, its policy, and the SHA-256 of its secret: never the
// secret, which the leader generates (or the bootstrap's caller gives),
// hashes before proposing, and returns to the caller once. The Raft log and
// snapshots therefore hold no secret.
//
// The cluster is bootstrapped once: the first bootstrap-acl command creates
// the first management token and marks the state bootstrapped for good; a
// second one is ErrACLBootstrapped, even after that token is deleted,
// unless it repeats the first (the same token: a retry, whose caller holds
// the secret already), which changes nothing. Creating a token that exists
// with the same fields changes nothing either (Result.Created tells). The
// last management token cannot be deleted (ErrLastManagementToken), so a
// bootstrapped cluster always has a way in.

// Errors of the ACL commands.
var (
	// ErrACLBootstrapped: the ACL system was bootstrapped already.
	ErrACLBootstrapped = errors.New("ACLs are already bootstrapped")
	// ErrTokenNotFound: no token with this accessor id.
	ErrTokenNotFound = errors.New("token not found")
	// ErrTokenExists: a token with this accessor id or secret exists.
	ErrTokenExists = errors.New("a token with this accessor id or secret exists")
	// ErrLastManagementToken: deleting it would leave no management token.
	ErrLastManagementToken = errors.New("the last management token cannot be deleted")
	// ErrInvalidToken: the token's fields are malformed.
	ErrInvalidToken = errors.New("invalid token")
)

// MaxTokenNameLength bounds a token's name, in bytes.
const MaxTokenNameLength = 256

// ACLToken is a token as the state keeps it.
type ACLToken struct {
	// AccessorID names the token publicly (a UUID).
	AccessorID string     `codec:"a"`
	Name       string     `codec:"n,omitempty"`
	Policy     acl.Policy `codec:"p"`
	// SecretHash is the hex SHA-256 of the secret.
	SecretHash string `codec:"h"`
	// CreateIndex is the log index that created the token; CreateTime the
	// leader's clock then (unix ms).
	CreateIndex uint64 `codec:"ci"`
	CreateTime  int64  `codec:"ct"`
}

// BootstrapACL creates the first management token, once per cluster.
type BootstrapACL struct {
	Fenced
	ACLToken ACLToken `codec:"acl"`
}

// CreateACLToken creates a token.
type CreateACLToken struct {
	Fenced
	ACLToken ACLToken `codec:"acl"`
}

// DeleteACLToken deletes a token by accessor id.
type DeleteACLToken struct {
	Fenced
	AccessorID string `codec:"a"`
}

func (*BootstrapACL) Type() CommandType   { return TypeBootstrapACL }
func (*CreateACLToken) Type() CommandType { return TypeCreateACLToken }
func (*DeleteACLToken) Type() CommandType { return TypeDeleteACLToken }

// CheckAccessorID validates a token's accessor id: 1 to 64 bytes.
func CheckAccessorID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("%w: accessor id must have 1 to 64 characters", ErrInvalidToken)
	}
	return nil
}

// CheckToken validates the fields of a token to create: an accessor id,
// a policy, a secret hash of 64 hex digits, and a name of at most
// MaxTokenNameLength bytes of printable UTF-8.
func CheckToken(t ACLToken) error {
	if err := CheckAccessorID(t.AccessorID); err != nil {
		return err
	}
	switch {
	case !t.Policy.Valid():
		return fmt.Errorf("%w: policy %q: use read, submit or management", ErrInvalidToken, t.Policy)
	case !isHexHash(t.SecretHash):
		return fmt.Errorf("%w: the secret hash is not 64 hex digits", ErrInvalidToken)
	}
	return CheckTokenName(t.Name)
}

// CheckTokenName validates a token's name.
func CheckTokenName(name string) error {
	if len(name) > MaxTokenNameLength {
		return fmt.Errorf("%w: name longer than %d bytes", ErrInvalidToken, MaxTokenNameLength)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: name is not UTF-8", ErrInvalidToken)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: name has the unprintable character %U", ErrInvalidToken, r)
		}
	}
	return nil
}

func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (s *State) applyBootstrapACL(index uint64, c *BootstrapACL) Result {
	if s.aclBootstrap != 0 {
		return Result{Err: s.RebootstrapACL(c.ACLToken)}
	}
	if c.ACLToken.Policy != acl.Management {
		return Result{Err: fmt.Errorf("%w: the bootstrap token is a management token, not %q", ErrInvalidToken, c.ACLToken.Policy)}
	}
	r := s.addToken(index, c.Time, c.ACLToken)
	if r.Created {
		s.aclBootstrap = index
	} else if r.Err == nil {
		// The token existed before the bootstrap (created by a command,
		// not the API): it bootstraps nothing.
		r.Err = fmt.Errorf("%w: accessor id %s", ErrTokenExists, c.ACLToken.AccessorID)
	}
	return r
}

// RebootstrapACL is what a bootstrap with token t comes to once ACLs are
// bootstrapped: nil if t is the bootstrap token (a retry of the bootstrap
// that made it), else ErrACLBootstrapped. A leader answers from it without
// a Raft entry.
func (s *State) RebootstrapACL(t ACLToken) error {
	if have, ok := s.tokens[t.AccessorID]; ok && have.CreateIndex == s.aclBootstrap && sameToken(*have, t) {
		return nil
	}
	return fmt.Errorf("%w (at index %d)", ErrACLBootstrapped, s.aclBootstrap)
}

// sameToken reports whether two tokens have the same fields, but for when
// they were created.
func sameToken(a, b ACLToken) bool {
	return a.AccessorID == b.AccessorID && a.Name == b.Name && a.Policy == b.Policy && a.SecretHash == b.SecretHash
}

func (s *State) applyCreateACLToken(index uint64, c *CreateACLToken) Result {
	return s.addToken(index, c.Time, c.ACLToken)
}

func (s *State) addToken(index uint64, now int64, t ACLToken) Result {
	if err := CheckToken(t); err != nil {
		return Result{Err: err}
	}
	if old, ok := s.tokens[t.AccessorID]; ok {
		if sameToken(*old, t) {
			return Result{}
		}
		return Result{Err: fmt.Errorf("%w: accessor id %s", ErrTokenExists, t.AccessorID)}
	}
	if _, ok := s.tokenByHash[t.SecretHash]; ok {
		return Result{Err: fmt.Errorf("%w: the secret is another token's", ErrTokenExists)}
	}
	t.CreateIndex, t.CreateTime = index, now
	tok := &t
	s.tokens[t.AccessorID] = tok
	s.tokenByHash[t.SecretHash] = tok
	s.tokenGen++
	return Result{Created: true}
}

func (s *State) applyDeleteACLToken(c *DeleteACLToken) Result {
	t, ok := s.tokens[c.AccessorID]
	if !ok {
		return Result{Err: fmt.Errorf("%w: %s", ErrTokenNotFound, c.AccessorID)}
	}
	if t.Policy == acl.Management && s.managementTokens() == 1 {
		return Result{Err: ErrLastManagementToken}
	}
	delete(s.tokens, c.AccessorID)
	delete(s.tokenByHash, t.SecretHash)
	s.tokenGen++
	return Result{}
}

func (s *State) managementTokens() int {
	n := 0
	for _, t := range s.tokens {
		if t.Policy == acl.Management {
			n++
		}
	}
	return n
}

// TokenBySecretHash returns the token whose secret hashes to hash (hex
// SHA-256).
func (s *State) TokenBySecretHash(hash string) (ACLToken, bool) {
	t, ok := s.tokenByHash[hash]
	if !ok {
		return ACLToken{}, false
	}
	return *t, true
}

// Tokens lists every token, oldest first.
func (s *State) Tokens() []ACLToken {
	out := make([]ACLToken, 0, len(s.tokens))
	for _, t := range s.tokens {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreateIndex != out[j].CreateIndex {
			return out[i].CreateIndex < out[j].CreateIndex
		}
		return out[i].AccessorID < out[j].AccessorID
	})
	return out
}

// NumTokens is the number of tokens.
func (s *State) NumTokens() int { return len(s.tokens) }

// ACLBootstrapped reports whether the ACL system was bootstrapped.
func (s *State) ACLBootstrapped() bool { return s.aclBootstrap != 0 }

// indexTokens rebuilds the secret-hash index from the tokens.
func (s *State) indexTokens() {
	s.tokenByHash = make(map[string]*ACLToken, len(s.tokens))
	for _, t := range s.tokens {
		s.tokenByHash[t.SecretHash] = t
	}
	s.tokenGen++
}

// TokenTable is a copy of the tokens, indexed by the hash of their secret,
// that is never changed: FSM publishes a new one whenever the tokens
// change, so that checking a request's token takes no lock on the state
// (FSM.Tokens).
type TokenTable struct {
	gen    uint64
	byHash map[string]ACLToken
}

// Lookup returns the token whose secret hashes to hash (hex SHA-256).
func (t *TokenTable) Lookup(hash string) (ACLToken, bool) {
	if t == nil {
		return ACLToken{}, false
	}
	tok, ok := t.byHash[hash]
	return tok, ok
}

// tokenTable is the state's tokens as a TokenTable; prev is returned
// unchanged when the tokens have not changed since it was made.
func (s *State) tokenTable(prev *TokenTable) *TokenTable {
	if prev != nil && prev.gen == s.tokenGen {
		return prev
	}
	t := &TokenTable{gen: s.tokenGen, byHash: make(map[string]ACLToken, len(s.tokenByHash))}
	for h, tok := range s.tokenByHash {
		t.byHash[h] = *tok
	}
	return t
}
