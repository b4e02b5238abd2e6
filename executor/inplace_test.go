package executor

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseLeaseFile(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"123456789", 123456789, true},
		{"123456789\n", 123456789, true},
		{"=123456789 123456789\n", 123456789, true},
		{"=123456789 123456000\n", 0, false}, // torn: the copies differ
		{"=123456789", 0, false},             // torn: one copy
		{"=123456789 1234", 0, false},        // torn: the second copy cut short
		{"=999 999\n0\n", 0, false},          // torn: a longer old value's tail
		{"", 0, false},
		{"soon", 0, false},
	}
	for _, tc := range tests {
		got, ok := parseLeaseFile(tc.in)
		require.Equal(t, tc.ok, ok, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
	}
}

// tmpfs mounts a small filesystem for the test (as root only; skipped
// otherwise).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill fills dir's filesystem and returns a function that frees it.
func fill(t *testing.T, dir string) func() {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
	require.NoError(t, f.Close())
	return func() { require.NoError(t, os.Remove(path)) }
}

// TestTheTokenAndTheLeaseAreWrittenOnAFullDisk: the fencing token and the
// lease file are overwritten in place when no new file fits.
func TestTheTokenAndTheLeaseAreWrittenOnAFullDisk(t *testing.T) {
	dir := tmpfs(t, "2m")
	require.NoError(t, saveFence(dir, fence{Cluster: "c1", Token: 3}))
	e := &Executor{cfg: Config{DataDir: dir, Runtime: RuntimeExec, Lease: time.Minute}, log: testLogger(t)}
	e.writeLeaseFileLocked()
	first, ok := readLeaseFile(filepath.Join(dir, leaseFileName))
	require.True(t, ok)

	free := fill(t, dir)
	require.ErrorIs(t, os.WriteFile(filepath.Join(dir, "probe"), []byte("x"), 0o600), syscall.ENOSPC, "the disk is full")
	want := fence{Cluster: "c2", Token: 9, Retired: []string{"c1"}}
	require.NoError(t, saveFence(dir, want))
	got, err := loadFence(dir)
	require.NoError(t, err)
	require.Equal(t, want, got)
	e.writeLeaseFileLocked()
	second, ok := readLeaseFile(filepath.Join(dir, leaseFileName))
	require.True(t, ok, "the lease file is still readable")
	require.Greater(t, second, first, "and was renewed")
	require.True(t, e.leaseInPlace)

	free()
	e.writeLeaseFileLocked()
	require.False(t, e.leaseInPlace, "written the usual way again")
	third, ok := readLeaseFile(filepath.Join(dir, leaseFileName))
	require.True(t, ok)
	require.Greater(t, third, second)
}
