package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/internal/freeport"
	"jobmaster/internal/pkitest"
	"jobmaster/membership"
	"jobmaster/pki"
	"jobmaster/transport"
)

func TestTLSCommandsIssueCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	r := runCLI("", "tls", "ca", "create", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Created jobmaster CA ")
	assert.Contains(t, r.stdout, filepath.Join(dir, "ca.pem"))
	st, err := os.Stat(filepath.Join(dir, "ca-key.pem"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	r = runCLI("", "tls", "ca", "create", "--dir", dir)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "exists: remove it first")

	out := filepath.Join(t.TempDir(), "certs")
	r = runCLI("", "tls", "cert", "create", "--role", "server", "--node-id", "m1", "--ca", dir, "--dir", out,
		"--ip", "10.0.0.1, 10.0.0.2", "--ip", "10.0.0.3", "--dns", "m1.example", "--dns", "m1.internal")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "server m1 (jobmaster://server/m1)")
	assert.Contains(t, r.stdout, "127.0.0.1, ::1, 10.0.0.1, 10.0.0.2, 10.0.0.3, localhost, m1.example, m1.internal", "repeated flags add up")
	files := transport.TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(out, "server-m1.pem"), Key: filepath.Join(out, "server-m1-key.pem")}
	tl, err := transport.LoadTLS(files)
	require.NoError(t, err, "the node's files load as its --tls-* flags would")
	id, _ := tl.Identity()
	assert.Equal(t, pki.Identity{Role: pki.Server, NodeID: "m1"}, id)
	st, err = os.Stat(files.Key)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--role", "admin", "--node-id", "x"}, 2, `--role: role "admin": use server, executor or client`},
		{[]string{"--role", "server"}, 2, "--node-id is required"},
		{[]string{"--role", "executor", "--node-id", "e/1"}, 2, "--node-id: "},
		{[]string{"--role", "executor", "--node-id", "e1", "--ip", "10.0.0.300"}, 2, `--ip: "10.0.0.300" is not an IP address`},
		{[]string{"--role", "executor", "--node-id", "e1", "--ca", t.TempDir()}, 1, "create one with 'jobmaster tls ca create'"},
		{[]string{"--role", "server", "--node-id", "m1", "--dir", out}, 1, "exists"},
	} {
		args := append([]string{"tls", "cert", "create", "--ca", dir}, tt.args...)
		r := runCLI("", args...)
		assert.Equal(t, tt.code, r.code, "%v: %s", tt.args, r.stderr)
		assert.Contains(t, r.stderr, tt.want, tt.args)
	}
}

func TestGossipKeygen(t *testing.T) {
	a := runCLI("", "operator", "gossip", "keygen")
	require.Equal(t, 0, a.code, a.stderr)
	b := runCLI("", "operator", "gossip", "keygen")
	k, err := membership.ParseKey(a.stdout)
	require.NoError(t, err)
	assert.Len(t, k, 32)
	assert.NotEqual(t, a.stdout, b.stdout)
}

// The refusal to start exposed without protection, as a user meets it.
func TestRolesRefuseToListenBeyondLoopbackUnprotected(t *testing.T) {
	port := func() string { _, p, _ := net.SplitHostPort(freeport.Must(t)); return p }
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--node-id", "m1", "--data-dir", t.TempDir(), "--http-addr", "0.0.0.0:" + port(),
			"--raft-addr", freeport.Must(t), "--gossip-addr", freeport.Must(t)},
			"this master listens beyond loopback (--http-addr 0.0.0.0:"},
		{[]string{"executor", "--node-id", "e1", "--data-dir", t.TempDir(), "--http-addr", freeport.Must(t),
			"--gossip-addr", "0.0.0.0:" + port(), "--join", "127.0.0.1:1"},
			"this executor listens beyond loopback (--gossip-addr 0.0.0.0:"},
	} {
		r := runCLI("", tt.args...)
		assert.Equal(t, 1, r.code, "%v: %s", tt.args, r.stderr)
		assert.Contains(t, r.stderr, tt.want)
		assert.Contains(t, r.stderr, "or start with --insecure")
		assert.Contains(t, r.stderr, "TLS (--tls-ca, --tls-cert, --tls-key)")
	}
}

// tlsFakeMaster serves the fake master's API over HTTPS with a server
// certificate from ca.
func tlsFakeMaster(t *testing.T, ca *pkitest.CA) string {
	t.Helper()
	f := newFakeMaster(t)
	srv := transport.NewServer(f.srv.Config.Handler, transport.ServerOptions{TLS: ca.Load(pki.Server, "m1")})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = transport.Serve(srv, ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func TestClientCommandsOverTLS(t *testing.T) {
	ca := pkitest.New(t.TempDir())
	addr := tlsFakeMaster(t, ca)
	alice := ca.Files(pki.Client, "alice")
	for name, c := range map[string]cli{
		"JOBMASTER_CACERT":        {env: map[string]string{addressEnv: addr, caCertEnv: ca.CAFile()}},
		"https:// and a CA":       {env: map[string]string{addressEnv: "https://" + addr, caCertEnv: ca.CAFile()}},
		"a client certificate":    {env: map[string]string{addressEnv: addr, caCertEnv: ca.CAFile(), clientCertEnv: alice.Cert, clientKeyEnv: alice.Key}},
		"--ca-cert over the env":  {env: map[string]string{addressEnv: addr, caCertEnv: "/nonexistent"}},
		"--client-cert and --key": {env: map[string]string{addressEnv: addr}},
	} {
		args := []string{"job", "list"}
		switch name {
		case "--ca-cert over the env":
			args = append(args, "--ca-cert", ca.CAFile())
		case "--client-cert and --key":
			args = append(args, "--ca-cert", ca.CAFile(), "--client-cert", alice.Cert, "--client-key", alice.Key)
		}
		r := c.run(args...)
		assert.Equal(t, 0, r.code, "%s: %s", name, r.stderr)
		assert.Contains(t, r.stdout, "No jobs", name)
	}

	r := cli{env: map[string]string{addressEnv: addr}}.run("job", "list", "--timeout", "1s")
	assert.Equal(t, 1, r.code, "plain HTTP to an HTTPS master fails")
	r = cli{env: map[string]string{addressEnv: addr, caCertEnv: "/nonexistent/ca.pem"}}.run("job", "list")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "client TLS: CA certificates: open /nonexistent/ca.pem")
	r = cli{env: map[string]string{addressEnv: addr, clientCertEnv: alice.Cert}}.run("job", "list")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--client-cert and --client-key go together")
}

func TestDevCredentials(t *testing.T) {
	home := t.TempDir()
	env := func(k string) string { return map[string]string{"HOME": home}[k] }
	dir := devCredentialsDir(env)
	assert.Equal(t, filepath.Join(home, ".cache", "jobmaster", "dev"), dir)
	assert.Equal(t, "/x/jobmaster/dev", devCredentialsDir(func(k string) string { return map[string]string{"XDG_CACHE_HOME": "/x", "HOME": home}[k] }))
	assert.Empty(t, devCredentialsDir(func(string) string { return "" }))
	_, ok := findDevCredentials(env)
	assert.False(t, ok, "nothing published")

	sec, err := newDevSecurity(filepath.Join(t.TempDir(), "tls"))
	require.NoError(t, err)
	unpublish, err := publishDevCredentials(dir, sec)
	require.NoError(t, err)
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	d, ok := findDevCredentials(env)
	require.True(t, ok, "published by a dev that runs (this process)")
	_, err = transport.LoadTLS(transport.TLSFiles{CA: d.ca, Cert: d.cert, Key: d.key})
	require.NoError(t, err)

	require.NoError(t, os.Chmod(dir, 0o755))
	_, ok = findDevCredentials(env)
	assert.False(t, ok, "a directory others could write to is not trusted")
	require.NoError(t, os.Chmod(dir, 0o700))

	pidFile := filepath.Join(dir, devPIDFile)
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(deadPID(t))+"\n"), 0o600))
	_, ok = findDevCredentials(env)
	assert.False(t, ok, "a dev that no longer runs published nothing")
	unpublish()
	_, err = os.Stat(filepath.Join(dir, devCAFile))
	assert.NoError(t, err, "files another dev published are left alone")

	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600))
	unpublish()
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "its own files, and the directory they leave empty, are removed when dev ends: %v", err)
}

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	require.NoError(t, err)
	_, err = p.Wait()
	require.NoError(t, err)
	return p.Pid
}

// The dev cluster's own credentials serve its nodes' TLS flags.
func TestDevClusterRunsSecure(t *testing.T) {
	sec, err := newDevSecurity(filepath.Join(t.TempDir(), "tls"))
	require.NoError(t, err)
	c, err := newDevCluster("/bin/jobmaster", t.TempDir(), &devOpts{basePort: 7400, executors: 2, slots: 4, runtime: "sim"}, nil, sec)
	require.NoError(t, err)
	for _, n := range c.nodes() {
		args := strings.Join(n.args, " ")
		assert.Contains(t, args, "--tls-ca="+filepath.Join(sec.dir, "ca.pem"), n.id)
		assert.Contains(t, args, "--gossip-keyring="+sec.keyring, n.id)
		role := "executor"
		if n.role == "master" {
			role = "server"
			assert.Contains(t, args, "--acl=true")
		}
		assert.Contains(t, args, "--tls-cert="+filepath.Join(sec.dir, role+"-"+n.id+".pem"), n.id)
	}
}

// Naming some of the dev's masters is using the dev: its credentials
// apply, as they do to the default list. Any other address keeps them
// away (its token must go to no other cluster).
func TestDevCredentialsApplyToAnyOfTheDevsMasters(t *testing.T) {
	for addrs, want := range map[string]bool{
		"127.0.0.1:7401,127.0.0.1:7402,127.0.0.1:7403": true,
		"127.0.0.1:7402": true,
		"https://127.0.0.1:7403/, 127.0.0.1:7401": true,
		"127.0.0.1:7402,10.0.0.1:7402":            false,
		"http://127.0.0.1:7401":                   false,
		"127.0.0.1:7431":                          false,
		"":                                        false,
	} {
		require.Equal(t, want, devAddresses(addrs), "%q", addrs)
	}
}
