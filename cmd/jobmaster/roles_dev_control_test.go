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
	require.Contains(t, r.stdout, "of the dev in "+dir)
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

	// A node that dies at once is said to have, with its log.
	c.masters[1].args = []string{"not-a-duration"}
	r = cli{}.run("dev", "restart", "e1", "--data-dir", dir)
	require.Equal(t, 1, r.code, r.stdout)
	require.Contains(t, r.stderr, "e1 exited at once; the end of its log")

	r = cli{}.run("dev", "restart", "m9", "--data-dir", dir)
	require.Contains(t, r.stderr, `no node "m9" in this dev cluster (its nodes: m1, e1)`)
	r = cli{}.run("dev", "restart", "m1", "--data-dir", t.TempDir())
	require.Contains(t, r.stderr, "no such socket")
}

// TestDevOrdersReachTheDevTheAddressNames: without --data-dir an order
// goes to the dev whose masters $JOBMASTER_ADDR names, never to another
// dev on the same machine (the one on the default ports, say).
func TestDevOrdersReachTheDevTheAddressNames(t *testing.T) {
	cache := t.TempDir()
	registry := devCredentialsDir(func(k string) string { return map[string]string{"XDG_CACHE_HOME": cache}[k] })
	devs := map[string]*devCluster{}
	for _, addr := range []string{"127.0.0.1:7401", "127.0.0.1:5401"} {
		dir := t.TempDir()
		c := &devCluster{bin: "/bin/sleep", dir: dir, out: io.Discard}
		c.masters = []*devNode{{id: "m1", http: addr, args: []string{"600"}, log: filepath.Join(dir, "m1.log")}}
		require.NoError(t, c.startAll())
		defer c.stopAll()
		defer c.startControl(dir, registry)()
		devs[addr] = c
	}

	env := map[string]string{"XDG_CACHE_HOME": cache, addressEnv: "https://127.0.0.1:5401,https://127.0.0.1:5402"}
	r := cli{env: env}.run("dev", "kill", "m1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "of the dev in "+devs["127.0.0.1:5401"].dir)
	require.False(t, devs["127.0.0.1:5401"].masters[0].running())
	require.True(t, devs["127.0.0.1:7401"].masters[0].running(), "the dev on the default ports was not asked")

	r = cli{env: map[string]string{"XDG_CACHE_HOME": cache}}.run("dev", "kill", "m1")
	require.Equal(t, 0, r.code, r.stderr)
	require.False(t, devs["127.0.0.1:7401"].masters[0].running())

	r = cli{env: map[string]string{"XDG_CACHE_HOME": cache, addressEnv: "127.0.0.1:6401"}}.run("dev", "kill", "m1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no 'jobmaster dev' serving 127.0.0.1:6401 ($JOBMASTER_ADDR) runs on this machine; for another, give its --data-dir")
}
