// Package membership is gossip membership (hashicorp/memberlist) for both
// roles. Each node gossips its Meta: its role, its HTTP address and, for a
// master, its Raft address and whether it already belongs to a Raft cluster;
// for an executor, its slot count. Masters use it to find each other (to
// bootstrap) and to find executors; executors use it to find masters.
//
// Vocabulary: a member is a node gossip knows, with its Meta and a status:
// alive, dead (failed: memberlist's probes and the others' could not reach
// it) or left (it said goodbye). A dead or departed member is reaped,
// forgotten, after ReapAfter; until then it may come back under its name.
//
// Membership is advisory: the leader decides that an executor is lost from
// its own heartbeats, never from gossip alone.
package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"jobmaster/transport"
)

// Roles.
const (
	RoleMaster   = "master"
	RoleExecutor = "executor"
)

// Member statuses.
const (
	StatusAlive = "alive"
	StatusDead  = "dead"
	StatusLeft  = "left"
)

// maxMeta is memberlist's limit on node metadata (it panics above it).
const maxMeta = memberlist.MetaMaxSize

// Meta is what a node tells the others about itself. Its addresses are
// bare "host:port": a member whose metadata has another form (a scheme
// above all) is not listed (checkAddrs).
type Meta struct {
	Role     string `json:"r"`
	HTTPAddr string `json:"h"`
	RaftAddr string `json:"ra,omitempty"`
	// InCluster is set by a master that has Raft state (it was bootstrapped or
	// added to a cluster): such a cluster must not be bootstrapped again.
	InCluster bool `json:"c,omitempty"`
	Slots     int  `json:"s,omitempty"`
	Version   int  `json:"v"`
	// Bootstrap is, on a master not in a cluster yet, the digest of the set
	// of masters it proposes to bootstrap with (--bootstrap-expect).
	Bootstrap string `json:"b,omitempty"`
	// Leaving is gossiped just before a graceful leave, so the others can
	// tell a departure from a failure (memberlist reports both as a leave
	// event).
	Leaving bool `json:"l,omitempty"`
}

// checkAddrs checks the addresses in m as a member refuses them from a
// peer: its HTTP address, and its Raft address when set, must each be a
// bare host:port (transport.CheckPeerAddress). Anyone with the gossip key
// writes metadata; an address with a scheme ("http://...") would have a
// TLS leader dial it in the clear and take the answer as an executor's.
// A node checks its own at start, so that it does not run unheard of.
func (m Meta) checkAddrs() error {
	if err := transport.CheckPeerAddress(m.HTTPAddr); err != nil {
		return fmt.Errorf("gossip metadata: HTTP address: %w", err)
	}
	if m.RaftAddr == "" {
		return nil
	}
	if err := transport.CheckPeerAddress(m.RaftAddr); err != nil {
		return fmt.Errorf("gossip metadata: Raft address: %w", err)
	}
	return nil
}

// Member is a node as gossip sees it.
type Member struct {
	ID         string
	GossipAddr string
	Status     string
	Meta       Meta
	// Since is when the member entered its status.
	Since time.Time
}

// Config configures a gossip node.
type Config struct {
	NodeID string
	// BindAddr is host:port for gossip (TCP and UDP).
	BindAddr string
	// Join lists gossip addresses to join; the node keeps retrying those
	// that no alive member has, in the background, so it rejoins them
	// after a partition heals.
	Join []string
	Meta Meta
	// Logger receives memberlist's log at debug level, and a warning when
	// peers' gossip cannot be read with this node's keys (keylog.go).
	Logger *slog.Logger
	// ReconnectInterval is how often the node retries Join addresses that are
	// not alive members (default 2s).
	ReconnectInterval time.Duration
	// ReapAfter is how long a dead or departed member stays listed (default
	// 30m); until then it may come back under its name.
	ReapAfter time.Duration
	// Now is the clock that dates status changes (Member.Since) and reaps
	// members by; default time.Now. Memberlist's own timers do not follow it.
	Now func() time.Time
	// Slow, when set, replaces the failure detector's timings: many
	// members sharing one machine (the benchmarks' fleet of simulated
	// executors) cannot answer probes within the LAN timings, and their
	// false suspicions flood gossip. Nothing in the product sets it.
	Slow *Timings
	// Keys encrypt gossip (keys.go): the first is used to send, every one
	// is accepted. None: gossip is in the clear.
	Keys [][]byte
}

// Timings are memberlist's failure-detector and dissemination intervals.
type Timings struct {
	ProbeInterval, ProbeTimeout, GossipInterval, PushPullInterval time.Duration
	SuspicionMult, RetransmitMult                                 int
	// UDPBufferSize is the largest gossip packet sent (every member reads
	// up to 64 KiB): bigger packets carry more broadcasts each.
	UDPBufferSize int
	// GossipNodes is how many members each gossip round goes to (0:
	// memberlist's 3); ReconnectInterval, when set, replaces the Config's.
	GossipNodes       int
	ReconnectInterval time.Duration
}

// Node is a running gossip member.
type Node struct {
	cfg     Config
	list    *memberlist.Memberlist
	keyring *memberlist.Keyring // nil: gossip in the clear
	// gossipLog is memberlist's log; it warns when gossip fails on keys.
	gossipLog *gossipLog
	// started: when the node started; joinWarn: the warning that it
	// reaches none of its join addresses.
	started  time.Time
	joinWarn rateLimited

	mu      sync.Mutex
	meta    Meta
	members map[string]*Member
	changed chan struct{}
	// departed: the members that said they are leaving (in their push/pull
	// state), until they are back.
	departed map[string]bool

	stop chan struct{}
	done chan struct{}
}

// Start binds the gossip port and starts joining.
func Start(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.ReconnectInterval == 0 {
		cfg.ReconnectInterval = 2 * time.Second
	}
	if cfg.ReapAfter == 0 {
		cfg.ReapAfter = 30 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	host, portStr, err := net.SplitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.BindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: bad port", cfg.BindAddr)
	}
	n := &Node{
		cfg:      cfg,
		meta:     cfg.Meta,
		members:  make(map[string]*Member),
		departed: make(map[string]bool),
		changed:  make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if err := n.checkOwnMeta(cfg.Meta); err != nil {
		return nil, err
	}
	adv, err := Advertise(cfg.BindAddr)
	if err != nil {
		return nil, err
	}
	advHost, _, _ := net.SplitHostPort(adv)
	mc := memberlist.DefaultLocalConfig()
	mc.Name = cfg.NodeID
	mc.BindAddr = host
	mc.BindPort = port
	mc.AdvertiseAddr = advHost
	mc.AdvertisePort = port
	mc.Delegate = (*delegate)(n)
	mc.Events = (*events)(n)
	n.started = cfg.Now()
	n.gossipLog = &gossipLog{logger: cfg.Logger, now: cfg.Now}
	mc.Logger = log.New(n.gossipLog, "", 0)
	// A restarted node comes back under its name, possibly on a new address.
	mc.DeadNodeReclaimTime = time.Second
	// Loopback and LAN clusters: detect failures in a few seconds.
	mc.ProbeInterval = 500 * time.Millisecond
	mc.PushPullInterval = 5 * time.Second
	// Gossip messages here are a few hundred bytes: compressing each one
	// (memberlist builds an LZW table per packet) cost more CPU than any
	// other part of gossip with hundreds of members, and saved nothing
	// worth having on a LAN. Compressed messages from others still decode.
	mc.EnableCompression = false
	if t := cfg.Slow; t != nil {
		mc.ProbeInterval, mc.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
		mc.GossipInterval, mc.PushPullInterval = t.GossipInterval, t.PushPullInterval
		mc.SuspicionMult, mc.RetransmitMult = t.SuspicionMult, t.RetransmitMult
		mc.UDPBufferSize = t.UDPBufferSize
		if t.GossipNodes > 0 {
			mc.GossipNodes = t.GossipNodes
		}
		if t.ReconnectInterval > 0 {
			n.cfg.ReconnectInterval = t.ReconnectInterval
		}
	}
	if len(cfg.Keys) > 0 {
		kr, err := memberlist.NewKeyring(cfg.Keys, cfg.Keys[0])
		if err != nil {
			return nil, fmt.Errorf("gossip keys: %w", err)
		}
		n.keyring = kr
		mc.Keyring = kr
		// Both are memberlist's defaults, stated: with a keyring, a message
		// in the clear is dropped and none is sent.
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	list, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip on %s: %w", cfg.BindAddr, err)
	}
	n.list = list
	go n.rejoin()
	return n, nil
}

// rejoin keeps joining the configured addresses that are not alive members:
// at start (the others may not be up yet) and after a partition, when
// memberlist alone would leave both sides believing the other dead. It
// also forgets members gone for longer than ReapAfter.
func (n *Node) rejoin() {
	defer close(n.done)
	t := time.NewTicker(n.cfg.ReconnectInterval)
	defer t.Stop()
	for {
		// Members are known by IP address: a join address given by name
		// is compared as what it names now.
		join := resolveJoin(n.cfg.Join)
		// Our own table, not memberlist's nodes: those are rewritten under
		// memberlist's lock, which Members() does not hold for its callers.
		n.mu.Lock()
		reaped := false
		now := n.cfg.Now()
		for id, m := range n.members {
			if m.Status != StatusAlive && now.Sub(m.Since) > n.cfg.ReapAfter {
				delete(n.members, id)
				delete(n.departed, id)
				reaped = true
			}
		}
		want := rejoinTargets(join, n.cfg.BindAddr, n.members)
		alone := !n.othersAliveLocked()
		if reaped {
			n.notifyLocked()
		}
		n.mu.Unlock()
		if len(want) > 0 {
			if _, err := n.list.Join(want); err != nil {
				switch {
				case keyMismatch(err.Error()):
					n.gossipLog.warned.warn(n.cfg.Logger, n.cfg.Now(), err.Error())
				case alone && now.Sub(n.started) >= joinWarnAfter && n.joinWarn.due(now):
					n.cfg.Logger.Warn("gossip: none of the join addresses answers, and no other node has been heard from: check --join and that the masters' gossip ports (TCP and UDP) are reachable; retrying",
						"addrs", want, "every", n.cfg.ReconnectInterval, "err", err)
				default:
					n.cfg.Logger.Debug("gossip join", "addrs", want, "err", err)
				}
			}
		}
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
	}
}

// joinWarnAfter is how long a node may be alone, its joins failing,
// before it warns: at start the others may not be up yet.
const joinWarnAfter = 10 * time.Second

// othersAliveLocked reports whether a member other than this node is
// alive.
func (n *Node) othersAliveLocked() bool {
	for id, m := range n.members {
		if id != n.cfg.NodeID && m.Status == StatusAlive {
			return true
		}
	}
	return false
}

// joinAddr is a join address as configured, and the addresses it names
// now: itself when it is an IP address, what it resolves to when it is a
// host name (or itself when that fails).
type joinAddr struct {
	addr  string
	names []string
}

// resolveJoin resolves each join address: members are known by IP
// address, so a host name is compared as the addresses it names.
func resolveJoin(join []string) []joinAddr {
	out := make([]joinAddr, 0, len(join))
	for _, a := range join {
		ja := joinAddr{addr: a, names: []string{a}}
		if host, port, err := net.SplitHostPort(a); err == nil && net.ParseIP(host) == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			ips, err := net.DefaultResolver.LookupHost(ctx, host)
			cancel()
			if err == nil && len(ips) > 0 {
				ja.names = ja.names[:0]
				for _, ip := range ips {
					ja.names = append(ja.names, net.JoinHostPort(ip, port))
				}
			}
		}
		out = append(out, ja)
	}
	return out
}

// rejoinTargets is what a node joins again: the join addresses (but its
// own, self) of which no address they name is an alive member's, in order.
// Only those: a partition heals through them, since every node's join
// addresses are the masters, and a push-pull with a master brings the
// whole table back. Rejoining every dead member as well made each node
// push its whole table to each of them every interval: with a thousand
// executors, a few flapping ones got that from every other, which kept
// them too busy to answer the probes that would have revived them.
func rejoinTargets(join []joinAddr, self string, members map[string]*Member) []string {
	alive := make(map[string]bool) // of the addresses join names
	for _, ja := range join {
		for _, a := range ja.names {
			alive[a] = false
		}
	}
	for _, m := range members {
		if _, ok := alive[m.GossipAddr]; ok && m.Status == StatusAlive {
			alive[m.GossipAddr] = true
		}
	}
	var want []string
	for _, ja := range join {
		if ja.addr == self || slices.Contains(ja.names, self) || slices.ContainsFunc(ja.names, func(a string) bool { return alive[a] }) {
			continue
		}
		want = append(want, ja.addr)
	}
	sort.Strings(want)
	return slices.Compact(want)
}

// Members lists every known member, including failed ones, by id.
func (n *Node) Members() []Member {
	n.mu.Lock()
	out := make([]Member, 0, len(n.members))
	for _, m := range n.members {
		out = append(out, *m)
	}
	n.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Role lists the members with the given role.
func (n *Node) Role(role string) []Member {
	var out []Member
	for _, m := range n.Members() {
		if m.Meta.Role == role {
			out = append(out, m)
		}
	}
	return out
}

// Get returns one member by id.
func (n *Node) Get(id string) (Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, ok := n.members[id]
	if !ok {
		return Member{}, false
	}
	return *m, true
}

// Changed returns a channel closed at the next membership change.
func (n *Node) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

func (n *Node) notifyLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// checkOwnMeta refuses metadata this node would gossip that memberlist
// could not carry (it panics above maxMeta) or that the others refuse
// (checkAddrs): a node does not run unheard of.
func (n *Node) checkOwnMeta(m Meta) error {
	if b, err := n.encodeMeta(m); err != nil {
		return err
	} else if len(b) > maxMeta {
		return fmt.Errorf("gossip metadata is %d bytes, at most %d", len(b), maxMeta)
	}
	return m.checkAddrs()
}

// UpdateMeta changes this node's metadata and gossips it.
func (n *Node) UpdateMeta(m Meta) error {
	if err := n.checkOwnMeta(m); err != nil {
		return err
	}
	n.mu.Lock()
	n.meta = m
	n.mu.Unlock()
	err := n.list.UpdateNode(time.Second)
	if err != nil && strings.Contains(err.Error(), "timeout waiting for update broadcast") {
		// The update is made and queued: it spreads with the next gossip
		// and push/pull even when a loaded machine sends it late.
		return nil
	}
	return err
}

// Push sends this node's state, its metadata with it, to the members with
// the given ids by push/pull, a state exchange over TCP, and takes theirs.
// An update of the metadata otherwise spreads by gossip: UDP packets,
// each update sent to a few members a couple of times (memberlist's
// retransmit limit is 2 with three members), so that one lost packet
// leaves a member with the old metadata until the next periodic
// push/pull, 5 s later. Push is for an update others wait on. It goes to
// the members one after the other, each taking up to memberlist's TCP
// timeout when unreachable, and returns an error only if it reached none.
func (n *Node) Push(ids ...string) error {
	n.mu.Lock()
	var addrs []string
	for _, id := range ids {
		if m, ok := n.members[id]; ok && id != n.cfg.NodeID && m.Status == StatusAlive && m.GossipAddr != "" {
			addrs = append(addrs, m.GossipAddr)
		}
	}
	n.mu.Unlock()
	if len(addrs) == 0 {
		return nil
	}
	_, err := n.list.Join(addrs)
	return err
}

// Leave announces departure and stops gossip.
//
// The others must tell a departure (left: a master leaves the Raft
// configuration) from a crash (dead), and memberlist does not: its leave
// message carries no metadata, and queued for gossip it replaces the
// update of this node's metadata to Leaving that may still wait there on
// a loaded machine. So before the leave message this node also says it is
// leaving by push/pull, a state exchange over TCP, to leaveTargets: its
// state then names it (LocalState), and the receiver marks it left
// whether that arrives before or after it learns the node is gone
// (departs). A peer it misses sees it left only if the metadata update
// reached it first, else dead.
func (n *Node) Leave(timeout time.Duration) error {
	n.mu.Lock()
	m := n.meta
	n.mu.Unlock()
	m.Leaving = true
	err := n.UpdateMeta(m)
	n.mu.Lock()
	peers := leaveTargets(resolveJoin(n.cfg.Join), n.cfg.NodeID, n.members)
	n.mu.Unlock()
	if len(peers) > 0 {
		if _, perr := n.list.Join(peers); perr != nil {
			// The leave message still goes out; a peer missed here
			// counts this node dead instead of left.
			n.cfg.Logger.Debug("gossip: pushing the leave to peers", "addrs", peers, "err", perr)
		}
	}
	err = errors.Join(err, n.list.Leave(timeout))
	return errors.Join(err, n.Shutdown())
}

// leaveTargets is whom a leaving node tells by push/pull: the alive
// members at its join addresses (every node's are the masters, who spread
// it to the rest), or, with none, up to maxLeaveTargets alive members.
func leaveTargets(join []joinAddr, self string, members map[string]*Member) []string {
	joined := make(map[string]bool)
	for _, ja := range join {
		for _, a := range ja.names {
			joined[a] = true
		}
	}
	var at, others []string
	for _, id := range slices.Sorted(maps.Keys(members)) {
		m := members[id]
		if id == self || m.Status != StatusAlive || m.GossipAddr == "" {
			continue
		}
		if joined[m.GossipAddr] {
			at = append(at, m.GossipAddr)
		} else if len(others) < maxLeaveTargets {
			others = append(others, m.GossipAddr)
		}
	}
	if len(at) > 0 {
		return at
	}
	return others
}

// maxLeaveTargets bounds the push/pulls of a leaving node that reaches
// none of its join addresses.
const maxLeaveTargets = 3

// Shutdown stops gossip without announcing it (as a crash would).
func (n *Node) Shutdown() error {
	select {
	case <-n.stop:
		return nil
	default:
	}
	close(n.stop)
	<-n.done
	return n.list.Shutdown()
}

func (n *Node) encodeMeta(m Meta) ([]byte, error) {
	return json.Marshal(m)
}

func (n *Node) observe(node *memberlist.Node, status string) {
	var meta Meta
	if err := json.Unmarshal(node.Meta, &meta); err != nil {
		n.cfg.Logger.Warn("gossip: undecodable metadata", "node", node.Name, "err", err)
		n.unlist(node.Name)
		return
	}
	if err := meta.checkAddrs(); err != nil {
		n.cfg.Logger.Warn("gossip: metadata refused", "node", node.Name, "err", err)
		n.unlist(node.Name)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case status == StatusDead && (meta.Leaving || n.departed[node.Name]):
		status = StatusLeft
	case status == StatusAlive && !meta.Leaving:
		delete(n.departed, node.Name) // back, or never leaving: a later failure is a failure
	}
	since := n.cfg.Now()
	if prev, ok := n.members[node.Name]; ok && prev.Status == status {
		since = prev.Since
	}
	n.members[node.Name] = &Member{ID: node.Name, GossipAddr: node.Address(), Status: status, Meta: meta, Since: since}
	n.notifyLocked()
}

// unlist forgets a member whose metadata cannot be used: it is not
// listed, whatever it said before. Kept with its earlier metadata, it
// stayed alive for good: memberlist tells of its departure with the
// metadata it last had, which is refused too.
func (n *Node) unlist(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.members[id]; ok {
		delete(n.members, id)
		n.notifyLocked()
	}
}

type delegate Node

func (d *delegate) NodeMeta(limit int) []byte {
	n := (*Node)(d)
	n.mu.Lock()
	m := n.meta
	n.mu.Unlock()
	b, _ := n.encodeMeta(m)
	if len(b) > limit {
		return nil
	}
	return b
}
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// pushState is what a node adds to its push/pull state: once its
// metadata says Leaving, its id.
type pushState struct {
	Leaving string `json:"leaving,omitempty"`
}

// maxPushState bounds the push/pull state read from a peer.
const maxPushState = 1024

func (d *delegate) LocalState(join bool) []byte {
	n := (*Node)(d)
	n.mu.Lock()
	leaving := n.meta.Leaving
	n.mu.Unlock()
	if !leaving {
		return nil
	}
	b, _ := json.Marshal(pushState{Leaving: n.cfg.NodeID})
	return b
}

func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	var st pushState
	if len(buf) == 0 || len(buf) > maxPushState || json.Unmarshal(buf, &st) != nil || st.Leaving == "" {
		return
	}
	(*Node)(d).departs(st.Leaving)
}

// departs records that member id said it is leaving: it is left once it
// is gone, and at once if it is already counted dead (its push/pull was
// merged after its leave message, or after it was found gone).
func (n *Node) departs(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, ok := n.members[id] // a push/pull merges its nodes first
	if !ok || id == n.cfg.NodeID {
		return
	}
	n.departed[id] = true
	if m.Status == StatusDead {
		up := *m
		up.Status = StatusLeft
		n.members[id] = &up
		n.notifyLocked()
	}
}

type events Node

func (e *events) NotifyJoin(node *memberlist.Node)   { (*Node)(e).observe(node, StatusAlive) }
func (e *events) NotifyUpdate(node *memberlist.Node) { (*Node)(e).observe(node, StatusAlive) }

// NotifyLeave is called for a failure and a departure alike (memberlist
// does not tell them apart in the node it passes): observe marks a node
// that gossiped Leaving as left, any other as dead.
func (e *events) NotifyLeave(node *memberlist.Node) { (*Node)(e).observe(node, StatusDead) }
