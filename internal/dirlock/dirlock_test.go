package dirlock

import (
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
