package executor

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestCheckToken(t *testing.T) {
	tests := []struct {
		name                   string
		newest, persisted, got uint64
		want                   tokenVerdict
	}{
		{"first leader", 0, 0, 3, tokenPersist},
		{"zero token on a fresh executor", 0, 0, 0, tokenCurrent},
		{"same leader", 5, 5, 5, tokenCurrent},
		{"older leader", 5, 5, 4, tokenStale},
		{"much older leader", 5, 5, 0, tokenStale},
		{"newer leader", 5, 5, 9, tokenPersist},
		{"seen but not yet on disk", 9, 5, 9, tokenPersist},
		{"older than seen though newer than on disk", 9, 5, 7, tokenStale},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, checkToken(tc.newest, tc.persisted, tc.got))
		})
	}
}

// TestTokenAcceptanceProperty: whatever tokens arrive, and whichever
// writes fail, the tokens acted on never decrease and each is on disk
// before it is acted on.
func TestTokenAcceptanceProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var newest, persisted, lastActed uint64
		for i := 0; i < 50; i++ {
			got := rapid.Uint64Range(0, 20).Draw(t, "token")
			switch checkToken(newest, persisted, got) {
			case tokenStale:
				if got >= newest {
					t.Fatalf("token %d refused with newest %d", got, newest)
				}
				continue
			case tokenPersist:
				newest = max(newest, got)
				if rapid.Bool().Draw(t, "writeFails") {
					continue
				}
				persisted = got
			}
			if got < lastActed || got > persisted {
				t.Fatalf("acted on %d after %d, persisted %d", got, lastActed, persisted)
			}
			lastActed = got
		}
	})
}

func TestTokenPersistence(t *testing.T) {
	dir := t.TempDir()
	tok, err := loadToken(dir)
	require.NoError(t, err)
	require.Zero(t, tok, "no file: token 0")

	require.NoError(t, saveToken(dir, 42))
	tok, err = loadToken(dir)
	require.NoError(t, err)
	require.EqualValues(t, 42, tok)
	require.NoError(t, saveToken(dir, 43))
	tok, err = loadToken(dir)
	require.NoError(t, err)
	require.EqualValues(t, 43, tok)

	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "no temporary file is left behind")

	require.NoError(t, os.WriteFile(filepath.Join(dir, tokenFile), []byte("garbage"), 0o644))
	_, err = loadToken(dir)
	require.ErrorContains(t, err, "corrupt")
	_, err = New(Config{NodeID: "e", DataDir: dir, HTTPAddr: "127.0.0.1:0", Runtime: RuntimeSim})
	require.ErrorContains(t, err, "corrupt", "an executor does not start without its token")

	require.Error(t, saveToken(filepath.Join(dir, "missing"), 1))
}
