package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Network namespaces, so that links between nodes can be cut.
//
// Topology: every node runs in its own namespace with one veth link to a
// router namespace, which forwards between all of them; one more veth pair
// links the router to the root namespace, which is where the test process
// runs and from where it reaches every node. Each node has one address
// 10.213.S.N/32 (S picked per run, N the node's number); the router holds
// 10.213.S.254 on every link and the root end holds 10.213.S.1.
//
// A cut between two nodes is silent, like a real partition: by default two
// "blackhole" policy rules in the router namespace (from A to B and from B
// to A) drop the forwarded packets, so a connect times out and a
// connection already open stalls. CutRoute instead adds a blackhole route
// for the peer inside each node's own namespace, as in
// `ip route add blackhole <peer>/32`: the kernel then answers the *local*
// sender at once with EINVAL (only the answers to the other side's packets
// vanish silently), which makes a partition fail fast instead of hang.
// The root namespace is never cut: the test process reaches every node
// throughout, as an operator's console would.
//
// We use a router instead of a bridge because a bridge forwards at layer 2,
// where iproute2 alone cannot drop packets per pair (no nftables, ebtables
// or tc classifiers on this kernel), and blackhole routes inside the
// namespaces are not silent for the sender.
//
// Names start with "jmc<pid of the test process>": a later run removes the
// namespaces of runs whose process is gone (a crash or a test timeout skips
// cleanup).

// CutMode says how Network.Cut drops traffic.
type CutMode string

const (
	// CutRule drops in the router: silent both ways (default).
	CutRule CutMode = "rule"
	// CutRoute adds blackhole routes in the nodes' namespaces.
	CutRoute CutMode = "route"
)

const netnsPrefix = "jmc"

// Network is the namespaces of one test cluster.
type Network struct {
	prefix string // jmc<pid>
	subnet string // "10.213.S."
	router string // router namespace
	mode   CutMode

	mu    sync.Mutex
	nodes map[string]*netNode
	next  int
	cuts  map[[2]string]bool // unordered pairs, smaller id first
	down  bool
}

type netNode struct {
	id, ns, ip, link string
}

// netnsUnavailable says why namespaces cannot be used here ("" if they can).
func netnsUnavailable() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "the ip command (iproute2) is not installed"
	}
	name := fmt.Sprintf("%sprobe%d", netnsPrefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Sprintf("ip netns add failed: %v: %s", err, strings.TrimSpace(string(out)))
	}
	defer exec.Command("ip", "netns", "del", name).Run()
	if out, err := exec.Command("ip", "netns", "exec", name, "true").CombinedOutput(); err != nil {
		return fmt.Sprintf("ip netns exec failed: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return ""
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeLeftoverNamespaces deletes the namespaces of earlier runs whose
// test process no longer exists.
func removeLeftoverNamespaces() []string {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil
	}
	var removed []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], netnsPrefix) {
			continue
		}
		name := f[0]
		digits := strings.TrimLeft(strings.TrimPrefix(name, netnsPrefix), "probe")
		end := 0
		for end < len(digits) && digits[end] >= '0' && digits[end] <= '9' {
			end++
		}
		pid, _ := strconv.Atoi(digits[:end])
		if pid == os.Getpid() {
			continue
		}
		if pid > 0 {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
				continue // a concurrent run
			}
		}
		if ipCmd("netns", "del", name) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}

// NewNetwork builds the router and the root link. Nodes are added with Add.
func NewNetwork(mode CutMode) (n *Network, err error) {
	if mode == "" {
		mode = CutRule
	}
	removeLeftoverNamespaces()
	prefix := fmt.Sprintf("%s%d", netnsPrefix, os.Getpid())
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	n = &Network{prefix: prefix, subnet: subnet, router: prefix + "-r", mode: mode,
		nodes: map[string]*netNode{}, cuts: map[[2]string]bool{}}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	host := prefix + "h" // root end of the router link; at most 15 bytes
	steps := [][]string{
		{"netns", "add", n.router},
		{"-n", n.router, "link", "set", "lo", "up"},
		{"link", "add", host, "type", "veth", "peer", "name", "up0", "netns", n.router},
		{"addr", "add", subnet + "1/32", "dev", host},
		{"link", "set", host, "up"},
		{"-n", n.router, "addr", "add", subnet + "254/32", "dev", "up0"},
		{"-n", n.router, "link", "set", "up0", "up"},
		{"-n", n.router, "route", "add", subnet + "1/32", "dev", "up0"},
		{"route", "add", subnet + "0/24", "via", subnet + "254", "dev", host, "onlink"},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return n, err
		}
	}
	fwd := exec.Command("ip", "netns", "exec", n.router, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward")
	if out, err := fwd.CombinedOutput(); err != nil {
		return n, fmt.Errorf("router forwarding: %v: %s", err, out)
	}
	return n, nil
}

// freeSubnet picks 10.213.S.0/24 with no route in the root namespace yet.
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "route").Output()
	if err != nil {
		return "", err
	}
	routes := string(out)
	start := os.Getpid() % 200
	for i := 0; i < 200; i++ {
		s := fmt.Sprintf("10.213.%d.", 10+(start+i)%200)
		if !strings.Contains(routes, s) {
			return s, nil
		}
	}
	return "", errors.New("no free 10.213.x.0/24 subnet")
}

// Add puts a node into its own namespace and returns its address.
func (n *Network) Add(id string) (string, error) {
	n.mu.Lock()
	n.next++
	num := n.next + 10
	n.mu.Unlock()
	if num > 250 {
		return "", errors.New("too many nodes")
	}
	nd := &netNode{id: id, ns: n.prefix + "-" + id, ip: fmt.Sprintf("%s%d", n.subnet, num), link: "v-" + id}
	steps := [][]string{
		{"netns", "add", nd.ns},
		{"-n", nd.ns, "link", "set", "lo", "up"},
		{"-n", n.router, "link", "add", nd.link, "type", "veth", "peer", "name", "eth0", "netns", nd.ns},
		{"-n", n.router, "addr", "add", n.subnet + "254/32", "dev", nd.link},
		{"-n", n.router, "link", "set", nd.link, "up"},
		{"-n", n.router, "route", "add", nd.ip + "/32", "dev", nd.link},
		{"-n", nd.ns, "addr", "add", nd.ip + "/32", "dev", "eth0"},
		{"-n", nd.ns, "link", "set", "eth0", "up"},
		{"-n", nd.ns, "route", "add", n.subnet + "254/32", "dev", "eth0"},
		{"-n", nd.ns, "route", "add", "default", "via", n.subnet + "254", "dev", "eth0"},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return "", err
		}
	}
	n.mu.Lock()
	n.nodes[id] = nd
	n.mu.Unlock()
	return nd.ip, nil
}

// Wrap is the command prefix that runs a program in a node's namespace.
// `ip netns exec` execs the program in place (no fork), so the pid of the
// started process is the program's once the exec has happened.
func (n *Network) Wrap(id string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return []string{"ip", "netns", "exec", n.nodes[id].ns}
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

func (n *Network) cutArgs(a, b *netNode, del bool) [][]string {
	op := "add"
	if del {
		op = "del"
	}
	if n.mode == CutRoute {
		return [][]string{
			{"-n", a.ns, "route", op, "blackhole", b.ip + "/32"},
			{"-n", b.ns, "route", op, "blackhole", a.ip + "/32"},
		}
	}
	return [][]string{
		{"-n", n.router, "rule", op, "from", a.ip, "to", b.ip, "blackhole", "pref", "100"},
		{"-n", n.router, "rule", op, "from", b.ip, "to", a.ip, "blackhole", "pref", "100"},
	}
}

// Cut drops all traffic between nodes a and b, both ways.
func (n *Network) Cut(a, b string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := pair(a, b)
	if n.cuts[p] {
		return nil
	}
	na, nb := n.nodes[p[0]], n.nodes[p[1]]
	if na == nil || nb == nil {
		return fmt.Errorf("cut %s-%s: unknown node", a, b)
	}
	for _, s := range n.cutArgs(na, nb, false) {
		if err := ipCmd(s...); err != nil {
			return err
		}
	}
	n.cuts[p] = true
	return nil
}

// Heal restores every link that Cut dropped.
func (n *Network) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for p := range n.cuts {
		for _, s := range n.cutArgs(n.nodes[p[0]], n.nodes[p[1]], true) {
			if err := ipCmd(s...); err != nil {
				errs = append(errs, err)
			}
		}
		delete(n.cuts, p)
	}
	return errors.Join(errs...)
}

// Cuts lists the cut pairs as "a-b", sorted.
func (n *Network) Cuts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for p := range n.cuts {
		out = append(out, p[0]+"-"+p[1])
	}
	sort.Strings(out)
	return out
}

// Close deletes every namespace (their veths go with them, and the root
// route with the root end of the router link). Idempotent.
func (n *Network) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return
	}
	n.down = true
	for _, nd := range n.nodes {
		_ = ipCmd("netns", "del", nd.ns)
	}
	_ = ipCmd("netns", "del", n.router)
	_ = ipCmd("link", "del", n.prefix+"h") // gone with the router already, normally
}
