package membership

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	s, err := NewKey()
	require.NoError(t, err)
	k, err := ParseKey(s)
	require.NoError(t, err)
	return k
}

func TestParseKey(t *testing.T) {
	s, err := NewKey()
	require.NoError(t, err)
	k, err := ParseKey(s)
	require.NoError(t, err)
	assert.Len(t, k, KeySize)
	_, err = ParseKey("not base64!")
	assert.ErrorContains(t, err, "not base64")
	_, err = ParseKey("AAAAAAAAAAAAAAAAAAAAAA==") // 16 bytes
	assert.ErrorContains(t, err, "is 16 bytes, want 32")
}

func TestKeyringFile(t *testing.T) {
	k1, _ := NewKey()
	k2, _ := NewKey()
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring")
	require.NoError(t, WriteKeyring(path, []string{k1, k2, k1}))
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	keys, err := ReadKeyring(path)
	require.NoError(t, err)
	require.Len(t, keys, 2, "a key given twice counts once")
	p1, _ := ParseKey(k1)
	assert.Equal(t, p1, keys[0], "the first key is the primary")

	require.NoError(t, os.WriteFile(path, []byte("# nothing\n\n"), 0o600))
	_, err = ReadKeyring(path)
	assert.ErrorContains(t, err, "holds no key")
	require.NoError(t, os.WriteFile(path, []byte(k1+"\nxyz\n"), 0o600))
	_, err = ReadKeyring(path)
	assert.ErrorContains(t, err, "line 2")

	_, err = LoadKeys([]string{k1}, path)
	assert.ErrorContains(t, err, "give one of them")
	keys, err = LoadKeys([]string{k2, k1}, "")
	require.NoError(t, err)
	assert.Len(t, keys, 2)
	keys, err = LoadKeys(nil, "")
	require.NoError(t, err)
	assert.Empty(t, keys, "no key: gossip in the clear")
}

func TestPlanKeyring(t *testing.T) {
	a, b, c := []byte("a"), []byte("b"), []byte("c")
	tests := []struct {
		name          string
		have          [][]byte
		primary       []byte
		want          [][]byte
		plan          KeyringChange
		wantErr       bool
		wantUnchanged bool
	}{
		{name: "same", have: [][]byte{a}, primary: a, want: [][]byte{a}, wantUnchanged: true},
		{name: "install", have: [][]byte{a}, primary: a, want: [][]byte{a, b}, plan: KeyringChange{Install: [][]byte{b}}},
		{name: "use", have: [][]byte{a, b}, primary: a, want: [][]byte{b, a}, plan: KeyringChange{Use: b}},
		{name: "remove", have: [][]byte{a, b}, primary: b, want: [][]byte{b}, plan: KeyringChange{Remove: [][]byte{a}}},
		{name: "all at once", have: [][]byte{a, b}, primary: a, want: [][]byte{c}, plan: KeyringChange{Install: [][]byte{c}, Use: c, Remove: [][]byte{a, b}}},
		{name: "empty", have: [][]byte{a}, primary: a, want: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlanKeyring(tt.have, tt.primary, tt.want)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantUnchanged, got.Empty())
			if !tt.wantUnchanged {
				assert.Equal(t, tt.plan, got)
			}
		})
	}
}

// started are gossip nodes to shut down at the end of a test.
type started []*Node

func (s *started) shutdown() {
	for _, n := range *s {
		_ = n.Shutdown()
	}
}

// start starts a gossip node with keys that joins join.
func (s *started) start(t *testing.T, id, addr string, join []string, keys ...[]byte) *Node {
	t.Helper()
	n, err := Start(Config{NodeID: id, BindAddr: addr, Join: join, Keys: keys, ReconnectInterval: 100 * time.Millisecond,
		Meta: Meta{Role: RoleExecutor, HTTPAddr: id + ".example:7431", Version: 1}})
	require.NoError(t, err)
	*s = append(*s, n)
	return n
}

func alive(n *Node, id string) bool {
	m, ok := n.Get(id)
	return ok && m.Status == StatusAlive
}

func TestWithoutTheKeyNotAMember(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	var s started
	defer s.shutdown()
	startKeyed := s.start
	k, other := newKey(t), newKey(t)
	a := freePort(t)
	m1 := startKeyed(t, "m1", a, nil, k)
	require.True(t, m1.Encrypted())
	wrong := startKeyed(t, "wrong", freePort(t), []string{a}, other)
	clear := startKeyed(t, "clear", freePort(t), []string{a})
	require.False(t, clear.Encrypted())
	// A node with the key joins; by the time it has, the others have
	// tried to join many times over (every 100 ms).
	time.Sleep(time.Second)
	good := startKeyed(t, "good", freePort(t), []string{a}, k)
	waitFor(t, "the node with the key to join", func() bool { return alive(m1, "good") && alive(good, "m1") })
	for _, n := range []*Node{m1, good} {
		for _, id := range []string{"wrong", "clear"} {
			_, ok := n.Get(id)
			assert.False(t, ok, "%s sees %s, which lacks the key", n.cfg.NodeID, id)
		}
	}
	for _, n := range []*Node{wrong, clear} {
		assert.Equal(t, []string{n.cfg.NodeID}, ids(n), "%s sees no member but itself", n.cfg.NodeID)
	}
	_, err := clear.SetKeys([][]byte{k})
	assert.ErrorContains(t, err, "not encrypted on this node")
}

func TestKeyRotation(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	var s started
	defer s.shutdown()
	startKeyed := s.start
	k1, k2 := newKey(t), newKey(t)
	a := freePort(t)
	nodes := []*Node{startKeyed(t, "m1", a, nil, k1)}
	nodes = append(nodes, startKeyed(t, "e1", freePort(t), []string{a}, k1), startKeyed(t, "e2", freePort(t), []string{a}, k1))
	all := func(what string) {
		t.Helper()
		waitFor(t, what, func() bool {
			for _, n := range nodes {
				for _, o := range nodes {
					if !alive(n, o.cfg.NodeID) && n != o {
						return false
					}
				}
			}
			return true
		})
	}
	// spread proves that messages flow after a step: a metadata change of
	// every node reaches every other.
	step := 0
	spread := func(what string) {
		t.Helper()
		step++
		for _, n := range nodes {
			require.NoError(t, n.UpdateMeta(Meta{Role: RoleExecutor, HTTPAddr: n.cfg.NodeID + ".example:7431", Slots: step, Version: 1}))
		}
		waitFor(t, what, func() bool {
			for _, n := range nodes {
				for _, o := range nodes {
					if m, _ := n.Get(o.cfg.NodeID); n != o && (m.Meta.Slots != step || m.Status != StatusAlive) {
						return false
					}
				}
			}
			return true
		})
	}
	all("every node to see the others")
	for _, st := range []struct {
		name string
		keys [][]byte
	}{
		{"install k2", [][]byte{k1, k2}},
		{"use k2", [][]byte{k2, k1}},
		{"remove k1", [][]byte{k2}},
	} {
		for _, n := range nodes {
			c, err := n.SetKeys(st.keys)
			require.NoError(t, err, st.name)
			require.False(t, c.Empty(), st.name)
		}
		spread("gossip to flow after " + st.name)
	}
	time.Sleep(2 * time.Second) // several probe rounds: nobody was suspected
	for _, n := range nodes {
		for _, o := range nodes {
			assert.True(t, n == o || alive(n, o.cfg.NodeID), "%s sees %s alive", n.cfg.NodeID, o.cfg.NodeID)
		}
	}
	old := startKeyed(t, "old", freePort(t), []string{a}, k1)
	late := startKeyed(t, "late", freePort(t), []string{a}, k2)
	waitFor(t, "a node with the new key to join", func() bool { return alive(nodes[0], "late") && alive(late, "m1") })
	_, ok := nodes[0].Get("old")
	assert.False(t, ok, "the removed key no longer admits a node")
	assert.Equal(t, []string{"old"}, ids(old))
}

func ids(n *Node) []string {
	var out []string
	for _, m := range n.Members() {
		out = append(out, m.ID)
	}
	return out
}
