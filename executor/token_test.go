package executor

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestTokenAcceptanceProperty: within one cluster, whatever tokens arrive,
// a token is refused exactly when it is older than the newest admitted, and
// the admitted ones never decrease.
func TestTokenAcceptanceProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var cur fence
		for i := 0; i < 50; i++ {
			got := rapid.Uint64Range(0, 20).Draw(t, "token")
			next, stale, _ := admitFence(cur, "c1", got)
			if stale != (got < cur.Token) {
				t.Fatalf("token %d: stale=%v with newest %d", got, stale, cur.Token)
			}
			if next.Token < cur.Token {
				t.Fatalf("admitted token went from %d to %d", cur.Token, next.Token)
			}
			cur = next
		}
	})
}

func TestTokenPersistence(t *testing.T) {
	dir := t.TempDir()
	f, err := loadFence(dir)
	require.NoError(t, err)
	require.Equal(t, fence{}, f, "no file: token 0, no cluster")

	require.NoError(t, saveFence(dir, fence{Token: 42}))
	f, err = loadFence(dir)
	require.NoError(t, err)
	require.Equal(t, fence{Token: 42}, f)
	want := fence{Cluster: "c2", Token: 43, Retired: []string{"c0", "c1"}}
	require.NoError(t, saveFence(dir, want))
	f, err = loadFence(dir)
	require.NoError(t, err)
	require.Equal(t, want, f)

	// A file written by a version without clusters (one line) still loads.
	require.NoError(t, os.WriteFile(filepath.Join(dir, tokenFile), []byte("17\n"), 0o644))
	f, err = loadFence(dir)
	require.NoError(t, err)
	require.Equal(t, fence{Token: 17}, f)

	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "no temporary file is left behind")

	require.NoError(t, os.WriteFile(filepath.Join(dir, tokenFile), []byte("garbage"), 0o644))
	_, err = loadFence(dir)
	require.ErrorContains(t, err, "corrupt")
	_, err = New(Config{NodeID: "e", DataDir: dir, HTTPAddr: "127.0.0.1:0", Runtime: RuntimeSim})
	require.ErrorContains(t, err, "corrupt", "an executor does not start without its token")

	require.Error(t, saveFence(filepath.Join(dir, "missing"), fence{Token: 1}))
}

func TestAdmitFence(t *testing.T) {
	cur := fence{Cluster: "c1", Token: 10, Retired: []string{"c0"}}
	tests := []struct {
		name    string
		cluster string
		token   uint64
		want    fence
		stale   bool
	}{
		{"same cluster, same token", "c1", 10, cur, false},
		{"same cluster, newer token", "c1", 12, fence{Cluster: "c1", Token: 12, Retired: []string{"c0"}}, false},
		{"same cluster, older token", "c1", 9, cur, true},
		{"a new cluster starts its tokens over", "c2", 3, fence{Cluster: "c2", Token: 3, Retired: []string{"c0", "c1"}}, false},
		{"a replaced cluster is stale whatever its token", "c0", 99, cur, true},
		{"a leader naming no cluster is judged by its token", "", 11, fence{Cluster: "c1", Token: 11, Retired: []string{"c0"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, stale, why := admitFence(cur, tc.cluster, tc.token)
			require.Equal(t, tc.stale, stale, why)
			require.Equal(t, tc.want, got)
		})
	}
	// A fresh executor adopts the first cluster it hears from.
	got, stale, _ := admitFence(fence{}, "c1", 4)
	require.False(t, stale)
	require.Equal(t, fence{Cluster: "c1", Token: 4}, got)
	// At most maxRetired replaced clusters are remembered.
	f := fence{Cluster: "x"}
	for i := 0; i < 40; i++ {
		f, _, _ = admitFence(f, fmt.Sprintf("c%d", i), 1)
	}
	require.Len(t, f.Retired, maxRetired)
}
