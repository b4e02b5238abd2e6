package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestArtifactsKeepTheWholeRun: a failed run's directory is copied whole
// (every log, not a tail, and the data below it); pipes are skipped.
func TestArtifactsKeepTheWholeRun(t *testing.T) {
	src := t.TempDir()
	big := strings.Repeat("a log line that must survive\n", 10000) // 290 KB: more than any tail
	require.NoError(t, os.WriteFile(filepath.Join(src, "m1.log"), []byte(big), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "history.log"), []byte("h\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(src, "m1", "raft"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "m1", "raft", "raft.db"), []byte("db"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(src, "pipe"), 0o644))

	dst := filepath.Join(t.TempDir(), "out")
	n, size, err := copyTree(src, dst)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, int64(len(big)+2+2), size)
	b, err := os.ReadFile(filepath.Join(dst, "m1.log"))
	require.NoError(t, err)
	require.Equal(t, big, string(b))
	_, err = os.Stat(filepath.Join(dst, "m1", "raft", "raft.db"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dst, "pipe"))
	require.True(t, os.IsNotExist(err), "a pipe is not copied")
}

func TestArtifactDirNames(t *testing.T) {
	t.Setenv("JOBMASTER_ARTIFACTS", "/x")
	at := time.Date(2026, 12, 1, 20, 1, 2, 0, time.UTC)
	require.Equal(t, "/x/chaos/TestChaos-seed7-20261201T200102", artifactDir("chaos", "TestChaos-seed7", at))
	require.Equal(t, "/x/integration/TestKill-a_b-20261201T200102", artifactDir("integration", "TestKill/a_b", at))
	t.Setenv("JOBMASTER_ARTIFACTS", "")
	require.True(t, strings.HasSuffix(artifactsRoot(), "/.artifacts"), artifactsRoot())
	_, err := os.Stat(filepath.Join(filepath.Dir(artifactsRoot()), "go.mod"))
	require.NoError(t, err, "the root is beside go.mod")
}
