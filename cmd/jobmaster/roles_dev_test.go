package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/examples"
	"jobmaster/internal/dirlock"
	"jobmaster/internal/freeport"
	"jobmaster/jobspec"
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
	require.Contains(t, s, fmt.Sprintf("Web UI: https://127.0.0.1:%d/ui/", base+1))
	require.Regexp(t, `Sign in with the management token dev-[0-9a-f]{16,} \(it is in `, s)
}

// freeBasePort finds a base port whose +1..+49 range is free and is handed
// to no other test.
func freeBasePort(t *testing.T) int {
	first, err := freeport.Run(49)
	require.NoError(t, err)
	return first - 1
}

// Bad dev flags are usage errors caught before anything starts.
func TestDevRejectsBadFlagsUpFront(t *testing.T) {
	for msg, args := range map[string][]string{
		`--runtime "bogus": use exec or sim`:  {"--runtime", "bogus"},
		"--executors must be between 1 and 9": {"--executors", "10"},
		"--slots must be positive":            {"--slots", "0"},
		"--base-port 70000 out of range":      {"--base-port", "70000"},
	} {
		r := runCLI("", append([]string{"dev"}, args...)...)
		require.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, msg)
		require.NotContains(t, r.stdout, "Starting", "nothing starts")
	}
}

// A second dev on the data directory of one that runs is refused before it
// writes anything there: new credentials would lock the first one's nodes
// out of each other.
func TestDevRefusesADataDirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	held, err := dirlock.Acquire(dir, "dev")
	require.NoError(t, err)
	defer held.Release()
	r := runCLI("", "dev", "--data-dir", dir, "--no-demo", "--base-port", strconv.Itoa(freeBasePort(t)))
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "is in use by another dev")
	_, err = os.Stat(filepath.Join(dir, "tls"))
	require.ErrorIs(t, err, os.ErrNotExist, "credentials written")
}

// A node id names the node in URLs and records: it follows the job id rule.
func TestNodeIDsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{"server", "--node-id", "m 9", "--data-dir", t.TempDir()},
		{"executor", "--node-id", "e/../x", "--data-dir", t.TempDir(), "--join", "127.0.0.1:1"},
	} {
		r := runCLI("", args...)
		require.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "--node-id: ")
		require.Contains(t, r.stderr, "use letters, digits")
	}
}

// The loss demo's check counts the demo's text as the job does: the
// report of a run (taken from the job's own commands, with sort's order)
// is what topWords says.
func TestTopWordsCountsTheDemoTextAsTheJobDoes(t *testing.T) {
	spec, err := jobspec.Parse(examples.WordCount())
	require.NoError(t, err)
	text := spec.Vertices[0].Env["TEXT"]
	cmd := exec.Command("sh", "-c", `printf '%s\n' "$TEXT" | tr -cs 'A-Za-z' '\n' | tr 'A-Z' 'a-z' | grep '...' | sort | uniq -c | awk '{ print $1, $2 }' | LC_ALL=C sort -k1,1nr -k2,2 | head -10`)
	cmd.Env = append(os.Environ(), "TEXT="+text)
	out, err := cmd.Output()
	require.NoError(t, err)
	require.Equal(t, strings.Split(strings.TrimSpace(string(out)), "\n"), topWords(spec, 10))
}
