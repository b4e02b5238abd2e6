package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/internal/freeport"
)

// TestDevFailoverDemo runs `jobmaster dev --failover-demo --exit-after-demo`
// as a user would after `make run`: a real cluster of child processes, the
// demo job, the leader killed mid-job.
func TestDevFailoverDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real cluster; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "jobmaster")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	base := freeBasePort(t)
	cmd := exec.Command(bin, "dev", "--exit-after-demo", "--failover-demo", "--base-port", strconv.Itoa(base))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("dev did not finish:\n%s\n%s", stdout.String(), stderr.String())
	}
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	s := stdout.String()
	require.Contains(t, s, "took over after")
	require.Contains(t, s, "The demo job FINISHED")
	require.Contains(t, s, "Most frequent words:")
	require.Contains(t, s, "No task was restarted by the failover")
	require.Contains(t, s, "export JOBMASTER_ADDR=")
}

// freeBasePort finds a base port whose +1..+49 range is free and is handed
// to no other test.
func freeBasePort(t *testing.T) int {
	first, err := freeport.Run(49)
	require.NoError(t, err)
	return first - 1
}
