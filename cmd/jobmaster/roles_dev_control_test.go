package main

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDevTakesOrdersOnItsSocket: a dev kills and restarts its nodes when
// told through its control socket; here the nodes are sleeps.
func TestDevTakesOrdersOnItsSocket(t *testing.T) {
	dir := t.TempDir()
	c := &devCluster{bin: "/bin/sleep", dir: dir, out: io.Discard}
	for _, id := range []string{"m1", "e1"} {
		n := &devNode{id: id, args: []string{"600"}, log: filepath.Join(dir, id+".log")}
		c.masters = append(c.masters, n)
	}
	require.NoError(t, c.startAll())
	defer c.stopAll()
	done := c.startControl(dir, "")
	defer done()

	r := cli{}.run("dev", "kill", "m1", "--data-dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "Killed m1 (pid ")
	require.False(t, c.masters[0].running())

	r = cli{}.run("dev", "kill", "m1", "--data-dir", dir)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "Error: m1 is not running")

	r = cli{}.run("dev", "restart", "m1", "--data-dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "Started m1 again (pid ")
	require.True(t, c.masters[0].running())
	before := c.masters[1].pid()
	r = cli{}.run("dev", "restart", "e1", "--data-dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "Stopped and started e1 again")
	require.NotEqual(t, before, c.masters[1].pid())

	r = cli{}.run("dev", "restart", "m9", "--data-dir", dir)
	require.Contains(t, r.stderr, `no node "m9" in this dev cluster (its nodes: m1, e1)`)
	r = cli{}.run("dev", "restart", "m1", "--data-dir", t.TempDir())
	require.Contains(t, r.stderr, "no such socket")
}
