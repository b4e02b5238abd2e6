package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/executor"
	"jobmaster/internal/dirlock"
	"jobmaster/launch"
	"jobmaster/pki"
)

// devOpts are the flags of `jobmaster dev`.
type devOpts struct {
	dataDir       string
	basePort      int
	executors     int
	slots         int
	runtime       string
	noDemo        bool
	exitAfterDemo bool
	failoverDemo  bool
	lossDemo      bool
}

// newDevCmd is `jobmaster dev`: a local cluster of child processes.
func newDevCmd(env *cliEnv) *cobra.Command {
	var o devOpts
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster of 3 masters and 2 executors with a demo job",
		Long: `Run a local cluster on this machine: 3 masters and 2 executors, each its
own process (this command's children), with data and logs in a temporary
directory. It submits the demo job (examples/wordcount.json), shows its
progress until it finishes, then keeps the cluster running until Ctrl-C.

The cluster runs secure: a fresh CA and certificates (TLS on every port), a
gossip key and --acl, all under the data directory's tls/. On the default
ports it leaves the CA, a client certificate and the management token in
~/.cache/jobmaster/dev while it runs, where the client commands find them.

With --failover-demo it kills the leader (kill -9) while the job runs and
shows another master taking over with a new fencing token, and that no task
was restarted. With --partition-loss-demo it kills the executor holding
split's partitions once split has finished, and shows what runs again (the
lost subtasks of split, for the counts that had not read them yet or ran on
that executor) and the same counts coming out.

While it runs, 'jobmaster dev kill NODE' kills a node (kill -9) and
'jobmaster dev restart NODE' starts it again (a node killed from outside
too), so you can play with failures.`,
		Args: groupArgs, // none: a word after it is an unknown command
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd, env, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", "", "keep data and logs here (default: a temporary directory, removed on exit)")
	f.IntVar(&o.basePort, "base-port", 7400, "masters use base+1.. (HTTP), base+11.. (Raft), base+21.. (gossip); executors base+31.. (HTTP), base+41.. (gossip)")
	f.IntVar(&o.executors, "executors", 2, "number of executors (1 to 9)")
	f.IntVar(&o.slots, "slots", 4, "slots per executor")
	f.StringVar(&o.runtime, "runtime", "exec", "executor runtime: exec or sim")
	f.BoolVar(&o.noDemo, "no-demo", false, "start the cluster without submitting the demo job")
	f.BoolVar(&o.exitAfterDemo, "exit-after-demo", false, "stop the cluster when the demo job ends (exit 0 if it FINISHED)")
	f.BoolVar(&o.failoverDemo, "failover-demo", false, "kill the leader while the demo job runs and show the takeover")
	f.BoolVar(&o.lossDemo, "partition-loss-demo", false, "kill the executor holding split's partitions after split finished, and show what runs again")
	cmd.AddCommand(
		newDevOrderCmd(env, "restart", "Restart a node of the running dev cluster (start it again if it was killed)"),
		newDevOrderCmd(env, "kill", "Kill a node of the running dev cluster (kill -9)"),
	)
	return cmd
}

// devNode is one child process of the dev cluster.
type devNode struct {
	id, role           string
	http, raft, gossip string
	log                string
	args               []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

type devCluster struct {
	bin     string
	dir     string
	env     []string
	masters []*devNode
	execs   []*devNode
	out     io.Writer
}

func runDev(cmd *cobra.Command, env *cliEnv, o *devOpts) error {
	// A reader of the dev's output that goes first (a `| tee` that the
	// terminal's Ctrl-C reached too) must not kill the dev on its next
	// line, before it stopped its nodes and removed its credentials:
	// with SIGPIPE asked for, such a write fails instead. (A handler, not
	// an ignored signal: the nodes it starts get the default back.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if o.executors < 1 || o.executors > 9 {
		return usageErrorf(cmd, "--executors must be between 1 and 9, got %d", o.executors)
	}
	if o.slots < 1 {
		return usageErrorf(cmd, "--slots must be positive, got %d", o.slots)
	}
	if o.runtime != "exec" && o.runtime != "sim" {
		return usageErrorf(cmd, "--runtime %q: use exec or sim", o.runtime)
	}
	if o.failoverDemo && o.lossDemo {
		return usageErrorf(cmd, "--failover-demo and --partition-loss-demo are two demos: pick one")
	}
	if o.lossDemo && o.executors < 2 {
		return usageErrorf(cmd, "--partition-loss-demo needs at least 2 executors, got %d", o.executors)
	}
	if o.basePort < 1 || o.basePort+50 > 65535 {
		return usageErrorf(cmd, "--base-port %d out of range", o.basePort)
	}
	out := cmd.OutOrStdout()
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	dir, temp := o.dataDir, o.dataDir == ""
	if temp {
		if dir, err = os.MkdirTemp("", "jobmaster-dev-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Before anything is written there: a second dev on the same
	// --data-dir would make new credentials over those the first one's
	// nodes run with.
	lock, err := dirlock.Acquire(dir, "dev")
	if err != nil {
		return err
	}
	defer lock.Release()
	sec, err := newDevSecurity(filepath.Join(dir, "tls"))
	if err != nil {
		return fmt.Errorf("dev credentials: %w", err)
	}
	c, err := newDevCluster(bin, dir, o, out, sec)
	if err != nil {
		return err
	}
	if err := c.checkPorts(); err != nil {
		return err
	}
	published := ""
	if c.masterAddrs() == api.DefaultAddress {
		if d := devCredentialsDir(env.getenv); d != "" {
			unpublish, err := publishDevCredentials(d, sec)
			if err != nil {
				return fmt.Errorf("dev credentials in %s: %w", d, err)
			}
			defer unpublish()
			published = d
		}
	}
	where := dir + " (removed on exit; keep it with --data-dir)"
	if !temp {
		where = dir
	}
	fmt.Fprintf(out, "jobmaster dev: a local cluster of %d masters and %d executors\n  data and logs in %s\n%s\n", len(c.masters), len(c.execs), where, describeDevSecurity(sec, published))
	if err := c.startAll(); err != nil {
		c.stopAll()
		return err
	}
	defer c.stopAll()
	c.printNodes()
	defer c.startControl(dir, devCredentialsDir(env.getenv))()

	addrs := c.masterAddrs()
	cl, err := client.New(addrs, client.WithTimeout(30*time.Second), client.WithToken(sec.token),
		client.WithCACert(sec.client.CA), client.WithClientCert(sec.client.Cert, sec.client.Key))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := cmd.Context()
	leader, err := c.waitReady(ctx, cl, sec)
	if err != nil {
		return err
	}
	if addrs != api.DefaultAddress || published == "" {
		fmt.Fprintf(out, "\nPoint the client at it with: export %s=%s %s=%s %s=%s %s=%s %s=$(cat %s)\n", addressEnv, addrs, caCertEnv, sec.client.CA,
			clientCertEnv, sec.client.Cert, clientKeyEnv, sec.client.Key, tokenEnv, sec.tokenFile)
	}
	fmt.Fprint(out, describeDevUI(strings.Split(addrs, ","), sec))

	if !o.noDemo {
		finished, err := c.demo(cmd, env, cl, leader, o)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(out, "\nStopping the cluster.")
				return nil
			}
			return err
		}
		if o.exitAfterDemo {
			fmt.Fprintln(out, "\nStopping the cluster (--exit-after-demo).")
			if !finished {
				return &exitError{code: exitFailure}
			}
			return nil
		}
	}
	// The leader now (a failover demo moved it).
	if view, err := cl.Cluster(ctx); err == nil && view.Leader != nil && *view.Leader != "" {
		leader = *view.Leader
	}
	tips := "In another terminal, try:"
	if addrs != api.DefaultAddress || published == "" {
		// Without the export, client commands and 'dev kill' go to the
		// dev on the default ports, which may be another one.
		tips = "In another terminal, run the export line above first, then try:"
	}
	fmt.Fprintf(out, `
The cluster keeps running. Watch it in the web UI at https://%[2]s/ui/ (sign in
with the token above). %[4]s
  %[1]s members
  %[1]s job run examples/flaky.json --wait
  %[1]s job run examples/wide.json --wait
  %[1]s job list
Kill the leader ('%[1]s dev kill %[3]s', or kill -9 its PID from the table
above) and watch another take over; bring it back with '%[1]s dev restart %[3]s'.
Press Ctrl-C to stop the cluster.
`, displayBin(bin), c.masters[0].http, leader, tips)
	<-ctx.Done()
	fmt.Fprintln(out, "\nStopping the cluster.")
	return nil
}

// displayBin is how to call the binary in hints: relative when it is the
// repository's bin/jobmaster.
func displayBin(bin string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, bin); err == nil && !strings.HasPrefix(rel, "..") {
			return "./" + rel
		}
	}
	return bin
}

func newDevCluster(bin, dir string, o *devOpts, out io.Writer, sec *devSecurity) (*devCluster, error) {
	c := &devCluster{bin: bin, dir: dir, out: out}
	host := "127.0.0.1"
	port := func(off int) string { return fmt.Sprintf("%s:%d", host, o.basePort+off) }
	var gossip []string
	for i := 1; i <= 3; i++ {
		gossip = append(gossip, port(20+i))
	}
	for i := 1; i <= 3; i++ {
		n := &devNode{id: fmt.Sprintf("m%d", i), role: "master", http: port(i), raft: port(10 + i), gossip: port(20 + i)}
		n.log = filepath.Join(dir, "logs", n.id+".log")
		s := launch.DefaultServer()
		s.NodeID, s.DataDir = n.id, filepath.Join(dir, n.id)
		s.HTTPAddr, s.RaftAddr, s.GossipAddr = n.http, n.raft, n.gossip
		s.Join, s.BootstrapExpect = gossip, 3
		tls, err := sec.issue(pki.Server, n.id)
		if err != nil {
			return nil, err
		}
		s.TLS, s.GossipKeyring, s.ACL = tls, sec.keyring, true
		n.args = s.Args()
		c.masters = append(c.masters, n)
	}
	// The executors share one host: each offers its share of it for the
	// resources tasks declare, so that together they do not offer it twice.
	cpu, mem := executor.HostCapacity()
	for i := 1; i <= o.executors; i++ {
		n := &devNode{id: fmt.Sprintf("e%d", i), role: "executor", http: port(30 + i), gossip: port(40 + i)}
		n.log = filepath.Join(dir, "logs", n.id+".log")
		e := launch.DefaultExecutor()
		e.NodeID, e.DataDir = n.id, filepath.Join(dir, n.id)
		e.HTTPAddr, e.GossipAddr, e.Join = n.http, n.gossip, gossip
		e.Slots, e.Runtime = o.slots, o.runtime
		e.CPUMillis, e.MemoryMB = max(cpu/int64(o.executors), 1), mem/int64(o.executors)
		// A short drain on SIGTERM (dev restart, Ctrl-C): the stop stays
		// well within the 20 s the supervisor waits.
		e.DrainGrace = devDrainGrace
		tls, err := sec.issue(pki.Executor, n.id)
		if err != nil {
			return nil, err
		}
		e.TLS, e.GossipKeyring = tls, sec.keyring
		n.args = e.Args()
		c.execs = append(c.execs, n)
	}
	return c, nil
}

// devDrainGrace is the dev executors' --drain-grace.
const devDrainGrace = 5 * time.Second

func (c *devCluster) nodes() []*devNode {
	return append(append([]*devNode{}, c.masters...), c.execs...)
}

func (c *devCluster) masterAddrs() string {
	var a []string
	for _, m := range c.masters {
		a = append(a, m.http)
	}
	return strings.Join(a, ",")
}

// checkPorts fails early, with a hint, when a port is taken.
func (c *devCluster) checkPorts() error {
	for _, n := range c.nodes() {
		for _, a := range []string{n.http, n.raft, n.gossip} {
			if a == "" {
				continue
			}
			l, err := net.Listen("tcp", a)
			if err != nil {
				return fmt.Errorf("%s is in use (is another 'jobmaster dev' running?); pick other ports with --base-port", a)
			}
			l.Close()
		}
	}
	return nil
}

func (c *devCluster) printNodes() {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tROLE\tPID\tHTTP\tRAFT\tGOSSIP\tLOG")
	for _, n := range c.nodes() {
		raft := n.raft
		if raft == "" {
			raft = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", n.id, n.role, n.pid(), n.http, raft, n.gossip, n.log)
	}
	tw.Flush()
}

func (c *devCluster) startAll() error {
	if err := os.MkdirAll(filepath.Join(c.dir, "logs"), 0o755); err != nil {
		return err
	}
	for _, n := range c.nodes() {
		if err := c.start(n); err != nil {
			return err
		}
	}
	return nil
}

// start runs a node in its own process group (Ctrl-C reaches only this
// command, which then stops the nodes in order); the node gets SIGTERM if
// this command dies.
func (c *devCluster) start(n *devNode) error {
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), c.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", n.id, err)
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

func (n *devNode) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// signal sends sig and waits up to wait for the node to exit.
func (n *devNode) signal(sig syscall.Signal, wait time.Duration) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
	n.mu.Lock()
	n.cmd = nil
	n.mu.Unlock()
}

// stopAll stops the executors (their tasks end) and then the masters.
func (c *devCluster) stopAll() {
	var wg sync.WaitGroup
	for _, group := range [][]*devNode{c.execs, c.masters} {
		for _, n := range group {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.signal(syscall.SIGTERM, 20*time.Second)
			}()
		}
		wg.Wait()
	}
}

// waitReady waits for a leader, bootstraps the ACLs with the management
// token of sec, and waits for every executor; it returns the leader's id.
func (c *devCluster) waitReady(ctx context.Context, cl *client.Client, sec *devSecurity) (string, error) {
	fmt.Fprint(c.out, "\nWaiting for the masters to elect a leader... ")
	start := time.Now()
	if err := c.bootstrapACL(ctx, cl, sec); err != nil {
		return "", err
	}
	var leader string
	for {
		if err := c.checkAlive(); err != nil {
			return "", err
		}
		if view, err := cl.Cluster(ctx); err == nil && view.Leader != nil {
			leader = *view.Leader
			fmt.Fprintf(c.out, "%s leads with fencing token %d (%.1fs)\n", leader, view.FencingToken, time.Since(start).Seconds())
			break
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return "", err
		}
	}
	fmt.Fprint(c.out, "Waiting for the executors to join... ")
	for {
		if err := c.checkAlive(); err != nil {
			return "", err
		}
		if view, err := cl.Cluster(ctx); err == nil {
			alive, slots := 0, 0
			for _, e := range view.Executors {
				if e.Status == "alive" {
					alive++
					slots += e.Slots
				}
			}
			if alive == len(c.execs) {
				fmt.Fprintf(c.out, "%d alive with %d slots (%.1fs)\n", alive, slots, time.Since(start).Seconds())
				return leader, nil
			}
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// bootstrapACL bootstraps the ACLs with the management token's secret,
// which makes the request safe to repeat until a leader answers. A cluster
// bootstrapped already (a --data-dir used again) must know the secret.
func (c *devCluster) bootstrapACL(ctx context.Context, cl *client.Client, sec *devSecurity) error {
	for {
		if err := c.checkAlive(); err != nil {
			return err
		}
		_, err := cl.BootstrapACL(ctx, sec.token)
		var apiErr *client.APIError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusConflict:
			if _, err := cl.Tokens(ctx); err != nil {
				return fmt.Errorf("the cluster in %s was bootstrapped with a management token this dev does not have (%v): start dev with a fresh --data-dir", c.dir, err)
			}
			return nil
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// checkAlive reports a node that exited on its own, with its log's tail.
func (c *devCluster) checkAlive() error {
	for _, n := range c.nodes() {
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		select {
		case <-done:
			return n.exited("exited")
		default:
		}
	}
	return nil
}

// exited is the error of a node that exited on its own (how says when),
// with the end of its log.
func (n *devNode) exited(how string) error {
	tail, _ := os.ReadFile(n.log)
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	return fmt.Errorf("%s %s; the end of its log (%s):\n%s", n.id, how, n.log, tail)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *devCluster) master(id string) *devNode {
	for _, m := range c.masters {
		if m.id == id {
			return m
		}
	}
	return nil
}
