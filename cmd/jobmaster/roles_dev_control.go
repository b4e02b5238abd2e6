package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/api"
)

// A running `jobmaster dev` takes orders on a Unix socket in its data
// directory (devSocket), so that a user playing with failures can kill a
// node and bring it back: `jobmaster dev kill NODE`, `jobmaster dev restart
// NODE`. Every dev also names the socket, under its first master's
// address, where the client commands find a dev's credentials
// (devControlFile), so that the dev JOBMASTER_ADDR names is found without
// flags. One request per connection, one line: the verb and the node;
// the answer is one line, "ok ..." or "error ...".

// devSocket is the name of the control socket in the data directory.
const devSocket = "dev.sock"

// devControlFile is the file in dir (devCredentialsDir) that names the
// control socket of the dev whose first master serves addr: every dev is
// found by the address its client commands use, so 'dev kill' reaches the
// dev that JOBMASTER_ADDR names, not whichever runs on the default ports.
func devControlFile(dir, addr string) string {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		addr = rest
	}
	addr = strings.TrimSuffix(strings.TrimSpace(addr), "/")
	return filepath.Join(dir, "control-"+strings.NewReplacer(":", "_", "/", "_", "[", "", "]", "").Replace(addr))
}

// devControl serves the control socket of a dev cluster.
type devControl struct {
	c  *devCluster
	ln net.Listener
	mu sync.Mutex // one order at a time
}

// listenControl opens the dev's control socket at path.
func (c *devCluster) listenControl(path string) (*devControl, error) {
	_ = os.Remove(path) // a socket a dead dev left behind
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	d := &devControl{c: c, ln: ln}
	go d.serve()
	return d, nil
}

func (d *devControl) close() { d.ln.Close() }

// maxSocketPath is the longest path a Unix socket may have on Linux.
const maxSocketPath = 107

// startControl opens the control socket in dir and, with registry (the
// directory of devControlFile), names it there under the first master's
// address. It returns what undoes both; a socket that cannot be opened is
// reported and done without.
func (c *devCluster) startControl(dir, registry string) func() {
	sock := filepath.Join(dir, devSocket)
	if abs, err := filepath.Abs(sock); err == nil {
		sock = abs
	}
	if len(sock) > maxSocketPath {
		fmt.Fprintf(c.out, "  (no 'jobmaster dev restart': the path %s is too long for a socket)\n", sock)
		return func() {}
	}
	ctl, err := c.listenControl(sock)
	if err != nil {
		fmt.Fprintf(c.out, "  (no 'jobmaster dev restart': %v)\n", err)
		return func() {}
	}
	named := ""
	if registry != "" && len(c.masters) > 0 {
		named = devControlFile(registry, c.masters[0].http)
		if os.MkdirAll(registry, 0o700) != nil || replaceFile(named, []byte(sock+"\n")) != nil {
			named = ""
		}
	}
	return func() {
		ctl.close()
		if b, err := os.ReadFile(named); err == nil && strings.TrimSpace(string(b)) == sock {
			os.Remove(named)
			os.Remove(registry) // only if that left it empty
		}
		os.Remove(sock)
	}
}

func (d *devControl) serve() {
	for {
		conn, err := d.ln.Accept()
		if err != nil {
			return
		}
		go d.handle(conn)
	}
}

func (d *devControl) handle(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return
	}
	d.mu.Lock()
	answer, err := d.c.order(strings.Fields(line))
	d.mu.Unlock()
	if err != nil {
		fmt.Fprintf(conn, "error %v\n", err)
		return
	}
	fmt.Fprintf(conn, "ok %s\n", answer)
}

// order carries out one order: kill or restart a node.
func (c *devCluster) order(words []string) (string, error) {
	if len(words) != 2 {
		return "", errors.New("want: kill NODE or restart NODE")
	}
	verb, id := words[0], words[1]
	var n *devNode
	var ids []string
	for _, x := range c.nodes() {
		ids = append(ids, x.id)
		if x.id == id {
			n = x
		}
	}
	if n == nil {
		return "", fmt.Errorf("no node %q in this dev cluster (its nodes: %s)", id, strings.Join(ids, ", "))
	}
	switch verb {
	case "kill":
		if !n.running() {
			return "", fmt.Errorf("%s is not running", id)
		}
		pid := n.pid()
		n.signal(syscall.SIGKILL, 5*time.Second)
		fmt.Fprintf(c.out, "\n>>> Killed %s (kill -9, pid %d), as asked.\n", id, pid)
		return fmt.Sprintf("killed %s (pid %d) of the dev in %s", id, pid, c.dir), nil
	case "restart":
		how := "started %s again"
		if n.running() {
			n.signal(syscall.SIGTERM, 20*time.Second)
			how = "stopped and started %s again"
		}
		if err := c.start(n); err != nil {
			return "", err
		}
		if err := n.waitListening(10 * time.Second); err != nil {
			fmt.Fprintf(c.out, "\n>>> Restarting %s, as asked, failed: %v\n", id, err)
			return "", err
		}
		done := fmt.Sprintf(how+" (pid %d)", id, n.pid())
		fmt.Fprintf(c.out, "\n>>> %s%s, as asked.\n", strings.ToUpper(done[:1]), done[1:])
		return done + " in the dev in " + c.dir, nil
	}
	return "", fmt.Errorf("unknown order %q: want kill or restart", verb)
}

// waitListening waits until the node's HTTP port takes connections, and
// says, with its log's tail, if the node exits first. A node still
// starting after within is taken as started; so is one without an HTTP
// address that has not exited within a moment.
func (n *devNode) waitListening(within time.Duration) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if n.http == "" {
		within = 300 * time.Millisecond
	}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return n.exited("exited at once")
		default:
		}
		if n.http != "" {
			if conn, err := net.DialTimeout("tcp", n.http, 200*time.Millisecond); err == nil {
				conn.Close()
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// running reports whether the node's process runs (a node killed from
// outside, kill -9 PID, has exited).
func (n *devNode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// newDevOrderCmd is `jobmaster dev kill|restart NODE`: an order to the
// running dev.
func newDevOrderCmd(env *cliEnv, verb, short string) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   verb + " NODE",
		Short: short,
		Long: short + `, in a 'jobmaster dev' running on this machine: the one
whose masters $JOBMASTER_ADDR names (the line 'dev' prints to export), else
the one on the default ports; or the one in --data-dir.
NODE is m1, m2, m3, e1, ... as the dev's table lists them.`,
		Example: "  jobmaster dev " + verb + " m2\n  jobmaster dev " + verb + " e1 --data-dir /tmp/mydev",
		Args:    exactArgs("NODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			sock, err := findDevSocket(env, dataDir)
			if err != nil {
				return err
			}
			answer, err := sendDevOrder(sock, verb+" "+args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.ToUpper(answer[:1])+answer[1:])
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the data directory of the dev to talk to (default: the dev serving $"+addressEnv+", else the default ports)")
	return cmd
}

// findDevSocket is the control socket of the dev in dataDir, else of the
// dev whose masters $JOBMASTER_ADDR names, else of the dev on the default
// ports.
func findDevSocket(env *cliEnv, dataDir string) (string, error) {
	if dataDir != "" {
		return filepath.Join(dataDir, devSocket), nil
	}
	addrs, from := env.getenv(addressEnv), "$"+addressEnv
	if addrs == "" {
		addrs, from = api.DefaultAddress, "the default ports"
	}
	if dir := devCredentialsDir(env.getenv); dir != "" {
		for _, a := range strings.Split(addrs, ",") {
			if b, err := os.ReadFile(devControlFile(dir, a)); err == nil {
				return strings.TrimSpace(string(b)), nil
			}
		}
	}
	return "", fmt.Errorf("no 'jobmaster dev' serving %s (%s) runs on this machine; for another, give its --data-dir", addrs, from)
}

// sendDevOrder sends one order and returns the dev's answer.
func sendDevOrder(sock, order string) (string, error) {
	conn, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return "", fmt.Errorf("no 'jobmaster dev' answers at %s: %v", sock, shortDialError(err))
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintln(conn, order)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("the dev at %s did not answer: %v", sock, err)
	}
	line = strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(line, "ok "); ok {
		return rest, nil
	}
	return "", errors.New(strings.TrimPrefix(line, "error "))
}

// shortDialError says why a socket could not be reached.
func shortDialError(err error) string {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return "no such socket (is it running, with this --data-dir?)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (it has stopped)"
	}
	return err.Error()
}
