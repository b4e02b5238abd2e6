package partition

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/internal/unprivileged"
)

// A producer that leaves a read-only directory among what is not its data
// (what `cp -a` of a read-only tree leaves) has its output kept, and no
// copy is left behind in staging; the store opens again.
func TestReadOnlyJunkIsRemoved(t *testing.T) {
	if !unprivileged.Here(t) {
		return
	}
	dir := filepath.Join(t.TempDir(), "partitions")
	s, err := Open(dir, quiet())
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "out")
	write(t, filepath.Join(out, "count", "0"), "aaa")
	write(t, filepath.Join(out, "junk", "ro", "f"), "x")
	require.NoError(t, os.Chmod(filepath.Join(out, "junk", "ro"), 0o500))

	m := meta(0)
	s.Begin(m, out)
	n, err := s.Commit(m.ID)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	ents, err := os.ReadDir(filepath.Join(dir, staging))
	require.NoError(t, err)
	require.Empty(t, ents, "nothing left in staging")
	s.Close()
	_, err = Open(dir, quiet())
	require.NoError(t, err)
}

// A partition whose data directory the producer made read-only is
// deleted when released, and the store opens again.
func TestReadOnlyPartitionIsDeletedOnRelease(t *testing.T) {
	if !unprivileged.Here(t) {
		return
	}
	dir := filepath.Join(t.TempDir(), "partitions")
	s, err := Open(dir, quiet())
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "out")
	write(t, filepath.Join(out, "count", "0"), "aaa")
	require.NoError(t, os.Chmod(filepath.Join(out, "count"), 0o500))

	m := meta(0)
	s.Begin(m, out)
	_, err = s.Commit(m.ID)
	require.NoError(t, err)
	require.Equal(t, []string{m.ID}, s.Release([]string{m.ID}))
	ents, err := os.ReadDir(filepath.Join(dir, staging))
	require.NoError(t, err)
	require.Empty(t, ents, "a released partition's bytes are deleted")
	s.Close()

	// And one left in staging by an earlier run is cleared at the next
	// start.
	stray := filepath.Join(dir, staging, "left", "ro")
	write(t, filepath.Join(stray, "f"), "x")
	require.NoError(t, os.Chmod(stray, 0o500))
	_, err = Open(dir, quiet())
	require.NoError(t, err)
}
