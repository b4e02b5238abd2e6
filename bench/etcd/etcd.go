// Package etcd runs an etcd cluster beside the benchmarks, as the anchor
// their figures are ratios to: three etcd processes on loopback (Debian's
// etcd-server, `make bench-anchors`), fsync on, default timings, driven
// through etcd's JSON gateway (POST /v3/kv/put) with the same HTTP client
// and the same closed loop as jobmaster's masters.
package etcd

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"jobmaster/internal/freeport"
)

// ErrNotInstalled: no etcd binary on PATH.
var ErrNotInstalled = errors.New("etcd is not installed (make bench-anchors installs Debian's etcd-server and etcd-client)")

// Binary is the etcd binary on PATH, or ErrNotInstalled.
func Binary() (string, error) {
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", ErrNotInstalled
	}
	return p, nil
}

// Version is what `etcd --version` prints first.
func Version(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// Node is one etcd member.
type Node struct {
	Name       string
	ClientAddr string // host:port of the client URL
	PeerAddr   string
	dir, log   string
	args       []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Cluster is three etcd members.
type Cluster struct {
	Bin   string
	Nodes []*Node
}

// Start starts three members under dir and waits until they have a
// leader.
func Start(ctx context.Context, bin, dir string) (*Cluster, error) {
	c := &Cluster{Bin: bin}
	var initial []string
	for i := 1; i <= 3; i++ {
		ca, err := freeport.Get()
		if err != nil {
			return nil, err
		}
		pa, err := freeport.Get()
		if err != nil {
			return nil, err
		}
		n := &Node{Name: fmt.Sprintf("etcd%d", i), ClientAddr: ca, PeerAddr: pa,
			dir: filepath.Join(dir, fmt.Sprintf("etcd%d", i)), log: filepath.Join(dir, fmt.Sprintf("etcd%d.log", i))}
		c.Nodes = append(c.Nodes, n)
		initial = append(initial, n.Name+"=http://"+pa)
	}
	for _, n := range c.Nodes {
		n.args = []string{"--name", n.Name, "--data-dir", n.dir,
			"--listen-client-urls", "http://" + n.ClientAddr, "--advertise-client-urls", "http://" + n.ClientAddr,
			"--listen-peer-urls", "http://" + n.PeerAddr, "--initial-advertise-peer-urls", "http://" + n.PeerAddr,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "jmbench", "--log-level", "warn"}
		if err := c.start(n); err != nil {
			c.Close()
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(wctx, http.DefaultClient); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(n *Node) error {
	if err := os.MkdirAll(filepath.Dir(n.log), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.Bin, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	return nil
}

// Restart starts a killed member again on its data directory.
func (c *Cluster) Restart(n *Node) error { return c.start(n) }

// Pid is the member's process id (0 when not running).
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Kill sends SIGKILL, calls then (if not nil) right after the signal, and
// returns the time of the signal once the process is gone.
func (n *Node) Kill(then func()) time.Time {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	t := time.Now()
	if cmd == nil {
		if then != nil {
			then()
		}
		return t
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	if then != nil {
		then()
	}
	<-done
	return t
}

// Close kills every member.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Kill(nil)
	}
}

// post sends a JSON body to a gateway path and decodes the answer.
func post(ctx context.Context, hc *http.Client, addr, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s%s: %s: %s", addr, path, resp.Status, bytes.TrimSpace(body))
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

// Put writes key = value through one member (a follower forwards it to the
// leader): etcd's answer comes once the write is committed.
func Put(ctx context.Context, hc *http.Client, n *Node, key string, value []byte) error {
	in := map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key)), "value": base64.StdEncoding.EncodeToString(value)}
	return post(ctx, hc, n.ClientAddr, "/v3/kv/put", in, nil)
}

// status is the part of /v3/maintenance/status the benchmarks read.
type status struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader string `json:"leader"`
}

// Leader returns the member that leads, as every running member says.
func (c *Cluster) Leader(ctx context.Context, hc *http.Client) (*Node, error) {
	ids := make(map[string]*Node)
	leaders := make(map[string]bool)
	for _, n := range c.Nodes {
		if n.Pid() == 0 {
			continue
		}
		var st status
		if err := post(ctx, hc, n.ClientAddr, "/v3/maintenance/status", map[string]string{}, &st); err != nil {
			return nil, err
		}
		ids[st.Header.MemberID] = n
		leaders[st.Leader] = true
	}
	if len(leaders) != 1 {
		return nil, errors.New("members disagree on the leader")
	}
	for l := range leaders {
		if n, ok := ids[l]; ok && l != "" && l != "0" {
			return n, nil
		}
	}
	return nil, errors.New("no leader")
}

// WaitLeader waits until every running member names the same leader.
func (c *Cluster) WaitLeader(ctx context.Context, hc *http.Client) (*Node, error) {
	for {
		n, err := c.Leader(ctx, hc)
		if err == nil {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcd: waiting for a leader: %w (last: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Followers are the running members but l.
func (c *Cluster) Followers(l *Node) []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n != l && n.Pid() != 0 {
			out = append(out, n)
		}
	}
	return out
}
