package forceremove

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/internal/unprivileged"
)

// A tree with read-only and unreadable directories, as a task may leave
// it, is removed whole by its owner.
func TestRemovesWhatATaskMadeReadOnly(t *testing.T) {
	if !unprivileged.Here(t) {
		return
	}
	root := filepath.Join(t.TempDir(), "work")
	for _, d := range []string{"a/ro/deep", "b/locked/x", "c"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, d, "f"), []byte("x"), 0o400))
	}
	require.NoError(t, os.Symlink("/", filepath.Join(root, "c", "to-root")))
	require.NoError(t, os.Chmod(filepath.Join(root, "a", "ro", "deep"), 0o500))
	require.NoError(t, os.Chmod(filepath.Join(root, "a", "ro"), 0o500))
	require.NoError(t, os.Chmod(filepath.Join(root, "b", "locked"), 0o000))
	require.Error(t, os.RemoveAll(root), "what os.RemoveAll cannot do")

	require.NoError(t, All(root))
	_, err := os.Lstat(root)
	require.True(t, os.IsNotExist(err), "%v", err)
	require.NoError(t, All(root), "nothing there: done")
}
