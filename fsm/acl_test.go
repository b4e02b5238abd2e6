package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"jobmaster/acl"
)

// testToken is a token whose secret is "secret-<accessor>".
func testToken(accessor, name string, p acl.Policy) ACLToken {
	return ACLToken{AccessorID: accessor, Name: name, Policy: p, SecretHash: hashOf("secret-" + accessor)}
}

func hashOf(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func TestACLBootstrapOnce(t *testing.T) {
	h := newHarness(t)
	require.False(t, h.s.ACLBootstrapped())
	// The bootstrap token is a management token.
	r := h.apply(&BootstrapACL{Fenced: h.fenced(), ACLToken: testToken("x", "", acl.Read)})
	require.ErrorIs(t, r.Err, ErrInvalidToken)
	require.False(t, h.s.ACLBootstrapped())

	r = h.apply(&BootstrapACL{Fenced: h.fenced(), ACLToken: testToken("root", "bootstrap", acl.Management)})
	require.NoError(t, r.Err)
	require.True(t, r.Created)
	require.True(t, h.s.ACLBootstrapped())
	at := h.s.Index()
	// A retry of the same bootstrap changes nothing and succeeds: its
	// caller knows the secret.
	hash := h.s.Capture().Hash()
	r = h.apply(&BootstrapACL{Fenced: h.fenced(), ACLToken: testToken("root", "bootstrap", acl.Management)})
	require.NoError(t, r.Err)
	require.False(t, r.Created)
	require.Equal(t, hash, h.s.Capture().Hash())
	tok, ok := h.s.TokenBySecretHash(hashOf("secret-root"))
	require.True(t, ok)
	require.Equal(t, "root", tok.AccessorID)
	require.Equal(t, acl.Management, tok.Policy)
	require.Equal(t, at, tok.CreateIndex)
	require.Equal(t, h.now, tok.CreateTime)

	// Once, even after a second management token exists and the first is
	// gone.
	require.ErrorIs(t, h.apply(&BootstrapACL{Fenced: h.fenced(), ACLToken: testToken("again", "", acl.Management)}).Err, ErrACLBootstrapped)
	require.NoError(t, h.apply(&CreateACLToken{Fenced: h.fenced(), ACLToken: testToken("m2", "", acl.Management)}).Err)
	require.NoError(t, h.apply(&DeleteACLToken{Fenced: h.fenced(), AccessorID: "root"}).Err)
	require.ErrorIs(t, h.apply(&BootstrapACL{Fenced: h.fenced(), ACLToken: testToken("again", "", acl.Management)}).Err, ErrACLBootstrapped)
	require.ErrorIs(t, h.apply(&BootstrapACL{Fenced: h.fenced(), ACLToken: testToken("root", "bootstrap", acl.Management)}).Err, ErrACLBootstrapped,
		"the bootstrap token, deleted, does not come back")
	_, ok = h.s.TokenBySecretHash(hashOf("secret-root"))
	require.False(t, ok, "a deleted token's secret is unknown")
}

func TestACLTokens(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, h.apply(&BootstrapACL{Fenced: h.fenced(), ACLToken: testToken("root", "", acl.Management)}).Err)
	require.NoError(t, h.apply(&CreateACLToken{Fenced: h.fenced(), ACLToken: testToken("r", "reader", acl.Read)}).Err)
	before := h.s.Capture().Hash()
	// The same token again is a retry: nothing changes.
	r := h.apply(&CreateACLToken{Fenced: h.fenced(), ACLToken: testToken("r", "reader", acl.Read)})
	require.NoError(t, r.Err)
	require.False(t, r.Created)
	for name, c := range map[string]struct {
		tok  ACLToken
		want error
	}{
		"same accessor":   {testToken("r", "", acl.Read), ErrTokenExists},
		"other policy":    {testToken("r", "reader", acl.Submit), ErrTokenExists},
		"same secret":     {ACLToken{AccessorID: "r2", Policy: acl.Read, SecretHash: hashOf("secret-r")}, ErrTokenExists},
		"no policy":       {ACLToken{AccessorID: "p", SecretHash: hashOf("p")}, ErrInvalidToken},
		"bad policy":      {ACLToken{AccessorID: "p", Policy: "root", SecretHash: hashOf("p")}, ErrInvalidToken},
		"no accessor":     {ACLToken{Policy: acl.Read, SecretHash: hashOf("p")}, ErrInvalidToken},
		"not a hash":      {ACLToken{AccessorID: "p", Policy: acl.Read, SecretHash: "plain secret"}, ErrInvalidToken},
		"upper-case hash": {ACLToken{AccessorID: "p", Policy: acl.Read, SecretHash: "AB" + hashOf("p")[2:]}, ErrInvalidToken},
		"long name":       {ACLToken{AccessorID: "p", Policy: acl.Read, SecretHash: hashOf("p"), Name: string(bytes.Repeat([]byte("n"), 257))}, ErrInvalidToken},
		"control in name": {ACLToken{AccessorID: "p", Policy: acl.Read, SecretHash: hashOf("p"), Name: "a\nb"}, ErrInvalidToken},
	} {
		r := h.apply(&CreateACLToken{Fenced: h.fenced(), ACLToken: c.tok})
		require.ErrorIs(t, r.Err, c.want, name)
	}
	require.Equal(t, before, h.s.Capture().Hash(), "refused commands change nothing")

	require.ErrorIs(t, h.apply(&DeleteACLToken{Fenced: h.fenced(), AccessorID: "nope"}).Err, ErrTokenNotFound)
	// The last management token stays.
	require.ErrorIs(t, h.apply(&DeleteACLToken{Fenced: h.fenced(), AccessorID: "root"}).Err, ErrLastManagementToken)
	require.NoError(t, h.apply(&DeleteACLToken{Fenced: h.fenced(), AccessorID: "r"}).Err)
	var ids []string
	for _, tk := range h.s.Tokens() {
		ids = append(ids, tk.AccessorID)
	}
	require.Equal(t, []string{"root"}, ids)

	// A stale leader's token command changes nothing.
	old := h.fenced()
	h.establish("m2")
	require.ErrorIs(t, h.apply(&CreateACLToken{Fenced: old, ACLToken: testToken("late", "", acl.Read)}).Err, ErrStaleToken)
	require.Equal(t, 1, h.s.NumTokens())
	checkInvariants(t, h.s)
}

// A header's counts move no memory: a small body that claims billions of
// records fails at once, with its size known or not.
func TestRestoreRefusesHeaderBombs(t *testing.T) {
	for _, hdr := range []snapshotHeader{
		{Format: snapshotFormat, Execs: 100_000_000_000},
		{Format: snapshotFormat, Jobs: 1 << 40},
		{Format: snapshotFormat, Tombstones: 1 << 50, Partitions: 1 << 50, Tokens: 1 << 50},
		{Format: snapshotFormat, Execs: -1},
	} {
		var buf bytes.Buffer
		c := NewState().Capture()
		c.header = hdr
		_, err := c.WriteTo(&buf)
		require.NoError(t, err)
		require.Less(t, buf.Len(), 100)
		_, err = RestoreSized(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		require.ErrorContains(t, err, "snapshot header", "%+v", hdr)
		_, err = Restore(bytes.NewReader(buf.Bytes()))
		require.Error(t, err, "%+v", hdr)
	}
	// A real snapshot passes the size check.
	var buf bytes.Buffer
	s := fixtureState(t)
	_, err := s.Capture().WriteTo(&buf)
	require.NoError(t, err)
	r, err := RestoreSized(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	require.Equal(t, s.Capture().Hash(), r.Capture().Hash())
}

// More executions than one decoding chunk restore exactly.
func TestRestoreAcrossChunks(t *testing.T) {
	h := newHarness(t)
	h.submit("wide", `{"vertices":[{"id":"v","parallelism":10000,"command":["true"]}]}`)
	h.submit("wider", `{"vertices":[{"id":"v","parallelism":10000,"command":["true"]}]}`)
	require.Greater(t, h.s.NumExecutions(), restoreChunk)
	var buf bytes.Buffer
	_, err := h.s.Capture().WriteTo(&buf)
	require.NoError(t, err)
	r, err := RestoreSized(&buf, int64(buf.Len()))
	require.NoError(t, err)
	require.Equal(t, h.s.Capture().Hash(), r.Capture().Hash())
	checkInvariants(t, r)
}

// The FSM publishes the tokens after every apply and restore, for lookups
// that take no lock.
func TestFSMPublishesItsTokens(t *testing.T) {
	f := New()
	apply := func(index uint64, c Command) {
		out := f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: MustEncode(c)}})
		require.NoError(t, out[0].([]Result)[0].Err)
	}
	apply(1, &EstablishLeadership{Node: "m1"})
	before := f.Tokens()
	_, ok := before.Lookup(hashOf("secret-root"))
	require.False(t, ok)
	apply(2, &BootstrapACL{Fenced: Fenced{Token: 1}, ACLToken: testToken("root", "", acl.Management)})
	apply(3, &CreateACLToken{Fenced: Fenced{Token: 1}, ACLToken: testToken("r", "reader", acl.Read)})
	tok, ok := f.Tokens().Lookup(hashOf("secret-r"))
	require.True(t, ok)
	require.Equal(t, "reader", tok.Name)
	_, ok = before.Lookup(hashOf("secret-r"))
	require.False(t, ok, "a published table never changes")
	same := f.Tokens()
	f.ApplyBatch([]*raft.Log{{Index: 4, Type: raft.LogCommand, Data: MustEncode(&CancelJob{Fenced: Fenced{Token: 1}, ID: "nope"})}})
	require.Same(t, same, f.Tokens(), "a command that changes no token publishes no new table")
	apply(5, &DeleteACLToken{Fenced: Fenced{Token: 1}, AccessorID: "r"})
	_, ok = f.Tokens().Lookup(hashOf("secret-r"))
	require.False(t, ok)

	snap, err := f.Snapshot()
	require.NoError(t, err)
	sink := &memSink{}
	require.NoError(t, snap.Persist(sink))
	g := New()
	require.NoError(t, g.Restore(ioNopCloser{&sink.Buffer}))
	_, ok = g.Tokens().Lookup(hashOf("secret-root"))
	require.True(t, ok, "a restore publishes the snapshot's tokens")
}
