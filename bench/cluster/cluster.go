// Package cluster runs a jobmaster cluster for the macro benchmarks: masters
// and executors as processes of bin/jobmaster on loopback, each with its own
// data directory (Raft's log is fsynced: nothing here turns it off) and log
// file. Nodes can be killed with SIGKILL and started again on their data
// directories.
package cluster

import (
	"context"
	"encoding/json"
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

	"jobmaster/api"
	"jobmaster/internal/freeport"
	"jobmaster/launch"
	"jobmaster/pki"
	"jobmaster/placement"
	"jobmaster/transport"
)

// Config describes a cluster.
type Config struct {
	// Bin is the jobmaster binary.
	Bin string
	// Dir receives the nodes' data directories and logs.
	Dir string
	// TLS runs every node secure, as `jobmaster dev` does: TLS with
	// certificates from a CA in Dir/tls, a gossip keyring, and --acl with
	// the ACLs bootstrapped. The harness's own clients (Cluster.HTTP,
	// NewHTTPClient, ClientOptions) then speak TLS too and send the
	// management token with every request.
	TLS bool
	// Placement is the masters' --placement.
	Placement placement.Policy
}

// masters is the number of masters; every node runs with the binary's
// default flags (log level info included) but for its identity: id, data
// directory, addresses, --join, --bootstrap-expect, and an executor's
// --slots and --runtime.
const masters = 3

// Node is one jobmaster process.
type Node struct {
	ID         string
	DataDir    string
	HTTPAddr   string
	RaftAddr   string
	GossipAddr string
	LogPath    string
	args       []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Cluster is a set of running nodes.
type Cluster struct {
	cfg       Config
	Masters   []*Node
	Executors []*Node
	// HTTP is the client of the harness's probes of this cluster (View,
	// GetJSON): HTTP's options, with the cluster's TLS when it has it.
	HTTP *http.Client
	sec  *security // nil without TLS
}

// probeOptions are the options of the harness's probe clients.
var probeOptions = transport.ClientOptions{Timeout: 5 * time.Second, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}

// HTTP is the client the harness uses for its own probes of plain nodes
// (without TLS): short timeouts, connections kept alive.
var HTTP = transport.NewClient(probeOptions)

// FreeAddr returns a loopback host:port nobody else is handed; see freeport.
func FreeAddr() (string, error) { return freeport.Get() }

// Start starts the masters and waits until they have elected a leader that
// holds a fencing token.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, HTTP: HTTP}
	if cfg.TLS {
		sec, err := newSecurity(filepath.Join(cfg.Dir, "tls"))
		if err != nil {
			return nil, err
		}
		c.sec = sec
		c.HTTP = c.NewHTTPClient(probeOptions)
	}
	for i := 0; i < masters; i++ {
		n := &Node{ID: fmt.Sprintf("m%d", i+1)}
		for _, a := range []*string{&n.HTTPAddr, &n.RaftAddr, &n.GossipAddr} {
			addr, err := FreeAddr()
			if err != nil {
				return nil, err
			}
			*a = addr
		}
		n.DataDir = filepath.Join(cfg.Dir, n.ID)
		n.LogPath = filepath.Join(cfg.Dir, n.ID+".log")
		c.Masters = append(c.Masters, n)
	}
	for _, n := range c.Masters {
		o := launch.DefaultServer()
		o.NodeID, o.DataDir = n.ID, n.DataDir
		o.HTTPAddr, o.RaftAddr, o.GossipAddr = n.HTTPAddr, n.RaftAddr, n.GossipAddr
		o.Join, o.BootstrapExpect = c.GossipAddrs(), masters
		o.Placement = cfg.Placement
		if c.sec != nil {
			o.TLS, o.GossipKeyring, o.ACL = c.sec.files(pki.Server, n.ID), c.sec.keyring, true
		}
		n.args = o.Args()
		if err := c.start(n); err != nil {
			c.Close()
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if c.sec != nil {
		if err := c.bootstrapACL(wctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	if _, err := c.WaitLeader(wctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// AddExecutor starts an executor process (`jobmaster executor`) with the
// given slots and runtime, joined to the masters' gossip.
func (c *Cluster) AddExecutor(id string, slots int, runtime string) (*Node, error) {
	n := &Node{ID: id}
	for _, a := range []*string{&n.HTTPAddr, &n.GossipAddr} {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		*a = addr
	}
	n.DataDir = filepath.Join(c.cfg.Dir, n.ID)
	n.LogPath = filepath.Join(c.cfg.Dir, n.ID+".log")
	o := launch.DefaultExecutor()
	o.NodeID, o.DataDir = n.ID, n.DataDir
	o.HTTPAddr, o.GossipAddr, o.Join = n.HTTPAddr, n.GossipAddr, c.GossipAddrs()
	o.Slots, o.Runtime = slots, runtime
	if c.sec != nil {
		o.TLS, o.GossipKeyring = c.sec.files(pki.Executor, n.ID), c.sec.keyring
	}
	n.args = o.Args()
	if err := c.start(n); err != nil {
		return nil, err
	}
	c.Executors = append(c.Executors, n)
	return n, nil
}

// GossipAddrs are the masters' gossip addresses, to join.
func (c *Cluster) GossipAddrs() []string {
	out := make([]string, len(c.Masters))
	for i, m := range c.Masters {
		out[i] = m.GossipAddr
	}
	return out
}

// HTTPAddrs are the masters' HTTP addresses.
func (c *Cluster) HTTPAddrs() []string {
	out := make([]string, len(c.Masters))
	for i, m := range c.Masters {
		out[i] = m.HTTPAddr
	}
	return out
}

// Master returns the master with the given id, or nil.
func (c *Cluster) Master(id string) *Node {
	for _, m := range c.Masters {
		if m.ID == id {
			return m
		}
	}
	return nil
}

func (c *Cluster) start(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("%s is already running", n.ID)
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== start %s %s\n", n.ID, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.cfg.Bin, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The node dies with the harness, however the harness ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
	return nil
}

// Restart starts a stopped node again on its data directory.
func (c *Cluster) Restart(n *Node) error { return c.start(n) }

// Pid is the node's process id, 0 when it is not running.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the node's process runs: started, and neither
// killed nor exited by itself.
func (n *Node) Running() bool {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to be gone. It returns the
// time the signal was sent.
func (n *Node) Kill() time.Time { return n.KillThen(nil) }

// KillThen is Kill that calls then (if not nil) right after sending the
// signal, before waiting for the process to be gone.
func (n *Node) KillThen(then func()) time.Time {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	at := time.Now()
	if cmd == nil {
		return at
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	if then != nil {
		then()
	}
	<-exited
	n.mu.Lock()
	n.cmd = nil
	n.mu.Unlock()
	return at
}

// Close kills every node.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, n := range append(append([]*Node{}, c.Executors...), c.Masters...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.Kill()
		}()
	}
	wg.Wait()
}

// Leader is the established leader: its node and fencing token.
type Leader struct {
	Node  *Node
	Token uint64
}

// View asks one master for its own view of the cluster (GET
// /v1/cluster?stale: no forwarding, served from its state).
func (c *Cluster) View(ctx context.Context, n *Node) (*api.Cluster, error) {
	var out api.Cluster
	if err := c.GetJSON(ctx, c.URL(n.HTTPAddr, "/v1/cluster?stale"), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Agreed returns the leader every running master names, when they all name
// the same one and have applied its fencing token; ok is false otherwise.
func (c *Cluster) Agreed(ctx context.Context) (Leader, bool) {
	var l Leader
	for _, m := range c.Masters {
		if !m.Running() {
			continue
		}
		v, err := c.View(ctx, m)
		if err != nil || v.Leader == nil || v.FencingToken == 0 {
			return Leader{}, false
		}
		ln := c.Master(*v.Leader)
		if ln == nil || !ln.Running() || (l.Node != nil && (l.Node != ln || l.Token != v.FencingToken)) {
			return Leader{}, false
		}
		l = Leader{Node: ln, Token: v.FencingToken}
	}
	return l, l.Node != nil
}

// WaitLeader waits until every running master agrees on a leader holding a
// fencing token, for at most a minute when ctx has no deadline.
func (c *Cluster) WaitLeader(ctx context.Context) (Leader, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	for {
		if l, ok := c.Agreed(ctx); ok {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return Leader{}, fmt.Errorf("no agreed leader: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Followers are the running masters other than the leader.
func (c *Cluster) Followers(l Leader) []*Node {
	var out []*Node
	for _, m := range c.Masters {
		if m != l.Node && m.Running() {
			out = append(out, m)
		}
	}
	return out
}

// WaitExecutors waits until the leader shows n executors alive.
func (c *Cluster) WaitExecutors(ctx context.Context, n int) error {
	for {
		l, ok := c.Agreed(ctx)
		if ok {
			var v api.Cluster
			if err := c.GetJSON(ctx, c.URL(l.Node.HTTPAddr, "/v1/cluster"), &v); err == nil {
				alive := 0
				for _, e := range v.Executors {
					if e.Status == "alive" {
						alive++
					}
				}
				if alive >= n {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d executors: %w", n, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// URL is the URL of path at the node at addr, as the cluster's clients
// reach it (https with TLS).
func (c *Cluster) URL(addr, path string) string { return transport.URL(c.HTTP, addr, path) }

// GetJSON GETs url through the cluster's probe client and decodes a 200
// answer into out.
func (c *Cluster) GetJSON(ctx context.Context, url string, out any) error {
	return getJSON(ctx, c.HTTP, url, out)
}

// GetJSON GETs url through HTTP (plain nodes) and decodes a 200 answer into
// out.
func GetJSON(ctx context.Context, url string, out any) error { return getJSON(ctx, HTTP, url, out) }

func getJSON(ctx context.Context, hc *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, out)
}
