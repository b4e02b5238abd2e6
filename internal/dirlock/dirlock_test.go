package dirlock

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A directory locked for a role is refused to a second holder of the
// same role, naming the first one's pid, until the first releases it; a
// lock of another role is separate.
func TestSecondHolderIsRefused(t *testing.T) {
	dir := t.TempDir()
	first, err := Acquire(dir, "executor")
	require.NoError(t, err)
	_, err = Acquire(dir, "executor")
	require.ErrorContains(t, err, "is in use by another executor (pid ")
	other, err := Acquire(dir, "master")
	require.NoError(t, err, "another role's lock")
	other.Release()
	first.Release()
	first.Release()
	again, err := Acquire(dir, "executor")
	require.NoError(t, err, "after the release")
	again.Release()
}

// A directory with a master's Raft log is refused to an executor, one
// with an executor's lock to a master; each takes its own, and an empty or
// missing directory is anyone's.
func TestAnotherRolesDirectoryIsRefused(t *testing.T) {
	require.NoError(t, CheckRole(filepath.Join(t.TempDir(), "new"), "executor"), "a directory not made yet")
	masterDir := t.TempDir()
	require.NoError(t, CheckRole(masterDir, "executor"), "an empty directory")
	require.NoError(t, os.MkdirAll(filepath.Join(masterDir, "raft"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(masterDir, "raft", "raft.db"), nil, 0o600))
	require.ErrorContains(t, CheckRole(masterDir, "executor"), "belongs to a master (raft/raft.db is in it)")
	require.NoError(t, CheckRole(masterDir, "master"))

	executorDir := t.TempDir()
	l, err := Acquire(executorDir, "executor")
	require.NoError(t, err)
	l.Release()
	require.ErrorContains(t, CheckRole(executorDir, "master"), "belongs to an executor (executor.lock is in it)")
	require.NoError(t, CheckRole(executorDir, "executor"))
}
