package master

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/transport"
	"jobmaster/wire"
)

// A master's data directory holds every job spec with its env: it is made
// its owner's alone, the Raft directory within too.
func TestDataDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m1")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.DataDir = dir })
	c.leader()
	for _, d := range []string{dir, filepath.Join(dir, "raft")} {
		st, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o700), st.Mode().Perm(), d)
	}
}

// A leader splits deploys below what an executor reads of a request.
func TestDeploysFitTheExecutorsBodyLimit(t *testing.T) {
	require.Less(t, wire.MaxDeployBytes, transport.MaxRequestBytes)
}
