package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/client"
	"jobmaster/pki"
	"jobmaster/transport"
)

// lockedText is a writer whose text may be read while it is written to.
type lockedText struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedText) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedText) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestJobLogsWithoutReachingTheExecutors: with TLS and ACLs on, a user who
// holds the CA and a submit token but no client certificate is refused by
// the executors, and `jobmaster job logs` reads the task's log through the
// masters instead: at once, with -f to the task's end, and the attempt
// before the current one (--attempt). So does a client whose network
// reaches the masters but not the executors.
func TestJobLogsWithoutReachingTheExecutors(t *testing.T) {
	skipShort(t)
	c := NewCluster(t, Options{ACL: true, TLS: true})
	submit := c.Token("submit", "ci")
	ctx := c.ctx()

	// The user's command line: the masters' addresses, the CA and a
	// token; no client certificate.
	env := []string{"JOBMASTER_ADDR=" + c.masterAddrs(), "JOBMASTER_CACERT=" + c.CA.CAFile(), "JOBMASTER_TOKEN=" + submit}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBMASTER_") {
			env = append(env, kv)
		}
	}
	cli := func(args ...string) (*exec.Cmd, *lockedText, *lockedText) {
		cmd := exec.Command(binary(t), args...)
		cmd.Env = env
		var stdout, stderr lockedText
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd, &stdout, &stderr
	}

	gate := filepath.Join(t.TempDir(), "go")
	c.Submit("off", fmt.Sprintf(`{"name": "off", "vertices": [{"id": "v", "parallelism": 1, "command": ["sh", "-c", %q]}]}`,
		"echo first line; "+awaitFile(gate)+"echo written later"))
	WaitFor(t, "the first line, read by the user", 30*time.Second, func() bool {
		cmd, stdout, _ := cli("job", "logs", "off", "v", "0")
		return cmd.Run() == nil && stdout.String() == "first line\n"
	})

	// The executor refuses this user: the log came through the masters.
	ca, err := transport.LoadTLS(transport.TLSFiles{CA: c.CA.CAFile()})
	require.NoError(t, err)
	user, err := client.New(c.masterAddrs(), client.WithHTTPClient(transport.NewClient(transport.ClientOptions{TLS: ca})),
		client.WithToken(submit), client.WithTimeout(20*time.Second))
	require.NoError(t, err)
	defer user.Close()
	l, err := user.LogsOf(ctx, "off", "v", 0, client.LogOptions{Stream: client.Stdout})
	require.NoError(t, err)
	text, err := io.ReadAll(l)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.Equal(t, "first line\n", string(text))
	require.NotEmpty(t, l.Master, "the log was not relayed by a master")
	require.ErrorContains(t, l.ExecutorErr, "this executor answers only peers with a certificate from the cluster's CA")
	require.ErrorContains(t, l.ExecutorErr, "(HTTP 403)")

	// Followed, through the masters, to the task's end.
	follow, followed, said := cli("job", "logs", "off", "v", "0", "-f")
	require.NoError(t, follow.Start())
	WaitFor(t, "the first line, followed", 30*time.Second, func() bool { return followed.String() == "first line\n" })
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = follow.Process.Kill()
		t.Fatalf("job logs -f did not end with its task; it printed:\n%s\nstderr:\n%s", followed.String(), said.String())
	}
	require.NoError(t, err, said.String())
	require.Equal(t, "first line\nwritten later\n", followed.String())
	require.Equal(t, "v/0 attempt 0 ended FINISHED\n", said.String())

	// A client that reaches the masters but not the executors (its
	// network refuses their addresses), though it holds a certificate
	// they would take.
	executors := map[string]bool{}
	for _, e := range c.Executors {
		executors[e.HTTPAddr] = true
	}
	hc := transport.NewClient(transport.ClientOptions{TLS: c.CA.Load(pki.Client, "harness")})
	tr := hc.Transport.(*http.Transport)
	dial := tr.DialTLSContext
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if executors[addr] {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return dial(ctx, network, addr)
	}
	walled, err := client.New(c.masterAddrs(), client.WithHTTPClient(hc), client.WithToken(submit), client.WithTimeout(20*time.Second))
	require.NoError(t, err)
	defer walled.Close()
	for _, follow := range []bool{false, true} {
		l, err = walled.LogsOf(ctx, "off", "v", 0, client.LogOptions{Stream: client.Stdout, Follow: follow})
		require.NoError(t, err)
		text, err = io.ReadAll(l)
		require.NoError(t, err, "followed: %v", follow)
		require.NoError(t, l.Close())
		require.Equal(t, "first line\nwritten later\n", string(text))
		require.NotEmpty(t, l.Master)
		require.ErrorContains(t, l.ExecutorErr, "connection refused")
	}

	// The attempt before the current one, from the executor the state
	// says it ran on: refused there, read through the masters.
	c.thirdAttempt(t, "off-again")
	cmd, stdout, stderr := cli("job", "logs", "off-again/v/0/1")
	require.NoError(t, cmd.Run(), stderr.String())
	require.Equal(t, "attempt 1\n", stdout.String())
	cmd, stdout, stderr = cli("job", "logs", "off-again", "v", "0", "--via-masters")
	require.NoError(t, cmd.Run(), stderr.String())
	require.Equal(t, "attempt 2\n", stdout.String())

	// An older attempt is the executors' alone: the error names those
	// that refused; the masters say they do not relay it.
	cmd, _, stderr = cli("job", "logs", "off-again/v/0/0")
	require.Error(t, cmd.Run())
	require.Contains(t, stderr.String(), "the logs of off-again/v/0/0 (attempt 0 of v[0]) are on no executor that answered, and 2 could not be asked: ")
	require.Contains(t, stderr.String(), "(HTTP 403: this executor answers only peers with a certificate")
	cmd, _, stderr = cli("job", "logs", "off-again/v/0/0", "--via-masters")
	require.Error(t, cmd.Run())
	require.Contains(t, stderr.String(), "the masters know only where the attempt before the current one ran")
}
