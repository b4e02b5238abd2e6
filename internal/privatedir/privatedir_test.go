package privatedir

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func mode(t *testing.T, p string) fs.FileMode {
	st, err := os.Stat(p)
	require.NoError(t, err)
	return st.Mode().Perm()
}

func TestEnsure(t *testing.T) {
	root := t.TempDir()
	fresh := filepath.Join(root, "a", "b")
	was, err := Ensure(fresh)
	require.NoError(t, err)
	require.Zero(t, was)
	require.Equal(t, fs.FileMode(0o700), mode(t, fresh))

	open := filepath.Join(root, "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	require.NoError(t, os.Chmod(open, 0o755))
	was, err = Ensure(open)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o755), was)
	require.Equal(t, fs.FileMode(0o700), mode(t, open))
	was, err = Ensure(open)
	require.NoError(t, err)
	require.Zero(t, was, "private already")

	file := filepath.Join(root, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = Ensure(file)
	require.Error(t, err)
}
