package membership

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"jobmaster/internal/freeport"
	"jobmaster/transport"
)

// ignoreProbe: memberlist's Shutdown does not wait for a probe in flight,
// which ends by itself within the probe interval.
var ignoreProbe = goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode")

func freePort(t *testing.T) string { return freeport.Must(t) }

// waitFor polls a condition until it holds; it fails the test after a
// generous bound that only a broken implementation reaches.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMembersFindEachOtherAndSeeFailures(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	a := freePort(t)
	m1, err := Start(Config{NodeID: "m1", BindAddr: a, Meta: Meta{Role: RoleMaster, HTTPAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", Version: 1}})
	require.NoError(t, err)
	defer m1.Shutdown()
	e1, err := Start(Config{NodeID: "e1", BindAddr: freePort(t), Join: []string{a}, Meta: Meta{Role: RoleExecutor, HTTPAddr: "127.0.0.1:3", Slots: 4, Version: 1}})
	require.NoError(t, err)

	waitFor(t, "m1 to see e1", func() bool { return len(m1.Role(RoleExecutor)) == 1 })
	ex := m1.Role(RoleExecutor)[0]
	require.Equal(t, "e1", ex.ID)
	require.Equal(t, 4, ex.Meta.Slots)
	require.Equal(t, "127.0.0.1:3", ex.Meta.HTTPAddr)
	waitFor(t, "e1 to see m1", func() bool { return len(e1.Role(RoleMaster)) == 1 })

	// Metadata updates spread.
	changed := e1.Changed()
	require.NoError(t, m1.UpdateMeta(Meta{Role: RoleMaster, HTTPAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", InCluster: true, Version: 1}))
	waitFor(t, "e1 to see m1 in a cluster", func() bool { m, _ := e1.Get("m1"); return m.Meta.InCluster })
	<-changed

	// A crashed member is reported dead, a departed one left.
	require.NoError(t, e1.Shutdown())
	waitFor(t, "m1 to see e1 dead", func() bool { m, _ := m1.Get("e1"); return m.Status == StatusDead })
	e2, err := Start(Config{NodeID: "e2", BindAddr: freePort(t), Join: []string{a}, Meta: Meta{Role: RoleExecutor, HTTPAddr: "127.0.0.1:4", Version: 1}})
	require.NoError(t, err)
	waitFor(t, "m1 to see e2", func() bool { m, ok := m1.Get("e2"); return ok && m.Status == StatusAlive })
	// m1 can see e2 before e2 has taken in m1's side of the join (each
	// merges the other's state after answering): a node that leaves
	// before it knows anyone tells no one.
	waitFor(t, "e2 to see m1", func() bool { return len(e2.Role(RoleMaster)) == 1 })
	require.NoError(t, e2.Leave(time.Second))
	waitFor(t, "m1 to see e2 left", func() bool { m, _ := m1.Get("e2"); return m.Status == StatusLeft })
}

// TestLeftWhicheverNewsComesFirst drives what a member hears of another:
// memberlist's callbacks and the push/pull state a leaving node sends.
// Its leave message may be merged before or after that state (the state
// is merged after the push/pull's answer), and before or after the
// update of its metadata to Leaving (which the leave message can replace
// in the gossip queue); whatever the order, a member that said it is
// leaving is left, and one that did not is dead.
func TestLeftWhicheverNewsComesFirst(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	m1, err := Start(Config{NodeID: "m1", BindAddr: freePort(t), Meta: Meta{Role: RoleMaster, HTTPAddr: "127.0.0.1:1", Version: 1}})
	require.NoError(t, err)
	defer m1.Shutdown()
	ev, dl := (*events)(m1), (*delegate)(m1)
	node := func(name string, leaving bool) *memberlist.Node {
		b, err := json.Marshal(Meta{Role: RoleExecutor, HTTPAddr: "127.0.0.1:2", Version: 1, Leaving: leaving})
		require.NoError(t, err)
		return &memberlist.Node{Name: name, Meta: b}
	}
	said := func(name string) []byte {
		b, err := json.Marshal(pushState{Leaving: name})
		require.NoError(t, err)
		return b
	}
	status := func(name string) string { m, _ := m1.Get(name); return m.Status }

	// The leave message first, with the old metadata, then the state.
	ev.NotifyJoin(node("a", false))
	ev.NotifyLeave(node("a", false))
	require.Equal(t, StatusDead, status("a"))
	dl.MergeRemoteState(said("a"), false)
	require.Equal(t, StatusLeft, status("a"))

	// The state first, then the leave message with the old metadata.
	ev.NotifyJoin(node("b", false))
	dl.MergeRemoteState(said("b"), false)
	require.Equal(t, StatusAlive, status("b"), "leaving, not yet gone")
	ev.NotifyLeave(node("b", false))
	require.Equal(t, StatusLeft, status("b"))

	// The metadata alone still says it.
	ev.NotifyJoin(node("c", false))
	ev.NotifyUpdate(node("c", true))
	ev.NotifyLeave(node("c", true))
	require.Equal(t, StatusLeft, status("c"))

	// Back again (a new process), then a crash: dead.
	ev.NotifyJoin(node("b", false))
	require.Equal(t, StatusAlive, status("b"))
	ev.NotifyLeave(node("b", false))
	require.Equal(t, StatusDead, status("b"))

	// A crash is dead; what names an unknown member, this node, or is not
	// a leaving state changes nothing.
	ev.NotifyJoin(node("d", false))
	ev.NotifyLeave(node("d", false))
	for _, buf := range [][]byte{said("nobody"), said("m1"), nil, []byte("{"), []byte(`{"leaving":""}`), make([]byte, maxPushState+1)} {
		dl.MergeRemoteState(buf, false)
	}
	require.Equal(t, StatusDead, status("d"))
	_, known := m1.Get("nobody")
	require.False(t, known)

	// A node says it is leaving in its push/pull state only once it is.
	require.Nil(t, dl.LocalState(false))
	require.NoError(t, m1.UpdateMeta(Meta{Role: RoleMaster, HTTPAddr: "127.0.0.1:1", Version: 1, Leaving: true}))
	require.JSONEq(t, string(said("m1")), string(dl.LocalState(false)))
}

func TestJoinRetriesUntilTheOtherSideIsUp(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	a := freePort(t)
	e1, err := Start(Config{NodeID: "e1", BindAddr: freePort(t), Join: []string{a}, ReconnectInterval: 100 * time.Millisecond,
		Meta: Meta{Role: RoleExecutor, HTTPAddr: "127.0.0.1:1", Version: 1}})
	require.NoError(t, err)
	defer e1.Shutdown()
	m1, err := Start(Config{NodeID: "m1", BindAddr: a, Meta: Meta{Role: RoleMaster, HTTPAddr: "127.0.0.1:2", Version: 1}})
	require.NoError(t, err)
	defer m1.Shutdown()
	waitFor(t, "e1 to join m1 after m1 started", func() bool { return len(e1.Role(RoleMaster)) == 1 })
}

func TestMetaTooLargeIsAnError(t *testing.T) {
	_, err := Start(Config{NodeID: "x", BindAddr: freePort(t), Meta: Meta{Role: RoleMaster, HTTPAddr: fmt.Sprintf("%0600d", 1)}})
	require.ErrorContains(t, err, "gossip metadata")
}

func TestDeadMembersAreReaped(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	a := freePort(t)
	m1, err := Start(Config{NodeID: "m1", BindAddr: a, ReconnectInterval: 50 * time.Millisecond, ReapAfter: 300 * time.Millisecond,
		Meta: Meta{Role: RoleMaster, HTTPAddr: "127.0.0.1:1", Version: 1}})
	require.NoError(t, err)
	defer m1.Shutdown()
	e1, err := Start(Config{NodeID: "e1", BindAddr: freePort(t), Join: []string{a}, Meta: Meta{Role: RoleExecutor, HTTPAddr: "127.0.0.1:2", Version: 1}})
	require.NoError(t, err)
	waitFor(t, "m1 to see e1", func() bool { _, ok := m1.Get("e1"); return ok })
	require.NoError(t, e1.Shutdown())
	waitFor(t, "e1 dead", func() bool { m, _ := m1.Get("e1"); return m.Status == StatusDead })
	waitFor(t, "e1 reaped", func() bool { _, ok := m1.Get("e1"); return !ok })
}

// TestReapingFollowsTheClock: a dead member's Since and its reaping come
// from Config.Now. With a reap delay of an hour that the wall clock never
// reaches in this test, only the injected clock can reap it.
func TestReapingFollowsTheClock(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	start := time.Now().Round(0) // near the wall clock, so that only a jump of this clock reaps
	var elapsed atomic.Int64     // nanoseconds after start
	now := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	a := freePort(t)
	m1, err := Start(Config{NodeID: "m1", BindAddr: a, ReconnectInterval: 50 * time.Millisecond, ReapAfter: time.Hour, Now: now,
		Meta: Meta{Role: RoleMaster, HTTPAddr: "127.0.0.1:1", Version: 1}})
	require.NoError(t, err)
	defer m1.Shutdown()
	e1, err := Start(Config{NodeID: "e1", BindAddr: freePort(t), Join: []string{a}, Meta: Meta{Role: RoleExecutor, HTTPAddr: "127.0.0.1:2", Version: 1}})
	require.NoError(t, err)
	waitFor(t, "m1 to see e1", func() bool { _, ok := m1.Get("e1"); return ok })
	m, _ := m1.Get("e1")
	require.Equal(t, start, m.Since)

	elapsed.Store(int64(10 * time.Minute))
	require.NoError(t, e1.Shutdown())
	waitFor(t, "e1 dead", func() bool { m, _ := m1.Get("e1"); return m.Status == StatusDead })
	m, _ = m1.Get("e1")
	require.Equal(t, start.Add(10*time.Minute), m.Since, "dead since the clock's reading")

	elapsed.Store(int64(10*time.Minute + 61*time.Minute))
	waitFor(t, "e1 reaped", func() bool { _, ok := m1.Get("e1"); return !ok })
}

func TestRejoinTargetsAreJoinAddressesWithoutAnAliveMember(t *testing.T) {
	members := map[string]*Member{
		"m1": {ID: "m1", GossipAddr: "10.0.0.1:7421", Status: StatusAlive},
		"m2": {ID: "m2", GossipAddr: "10.0.0.2:7421", Status: StatusDead},
		"e7": {ID: "e7", GossipAddr: "10.0.0.7:7441", Status: StatusDead},
	}
	join := resolveJoin([]string{"10.0.0.3:7421", "10.0.0.2:7421", "10.0.0.1:7421", "10.0.0.9:7421"})
	got := rejoinTargets(join, "10.0.0.9:7421", members)
	// m1 is alive; m2 is dead and a join address; 10.0.0.3 was never seen;
	// the node's own address and the dead executor e7 (no join address)
	// are not joined.
	if want := []string{"10.0.0.2:7421", "10.0.0.3:7421"}; !slices.Equal(got, want) {
		t.Fatalf("rejoinTargets = %v, want %v", got, want)
	}
}

// A leaving node tells the alive members at its join addresses, or, when
// it reaches none of them, a few other alive members.
func TestLeaveTargets(t *testing.T) {
	members := map[string]*Member{
		"m1": {ID: "m1", GossipAddr: "10.0.0.1:7421", Status: StatusAlive},
		"m2": {ID: "m2", GossipAddr: "10.0.0.2:7421", Status: StatusDead},
		"e1": {ID: "e1", GossipAddr: "10.0.0.5:7441", Status: StatusAlive},
		"e2": {ID: "e2", GossipAddr: "10.0.0.6:7441", Status: StatusAlive},
		"e3": {ID: "e3", GossipAddr: "10.0.0.7:7441", Status: StatusAlive},
		"e4": {ID: "e4", GossipAddr: "10.0.0.8:7441", Status: StatusAlive},
		"e9": {ID: "e9", GossipAddr: "10.0.0.9:7441", Status: StatusAlive},
	}
	join := resolveJoin([]string{"10.0.0.1:7421", "10.0.0.2:7421"})
	assert.Equal(t, []string{"10.0.0.1:7421"}, leaveTargets(join, "e9", members), "the alive join address only")
	members["m1"].Status = StatusDead
	assert.Equal(t, []string{"10.0.0.5:7441", "10.0.0.6:7441", "10.0.0.7:7441"}, leaveTargets(join, "e9", members),
		"no join address alive: a few alive members, not itself")
	assert.Empty(t, leaveTargets(nil, "e9", map[string]*Member{"e9": members["e9"]}), "alone")
}

// A join address given by name is compared as the addresses it names: it
// is not joined again while any of them is an alive member's (a name may
// name ::1 as well as 127.0.0.1), and is joined by its name otherwise.
func TestRejoinTargetsCompareNamesByWhatTheyName(t *testing.T) {
	got := resolveJoin([]string{"localhost:7421", "10.0.0.1:7421", "no-port", "nosuchhost.invalid:7421"})
	require.Len(t, got, 4)
	assert.Contains(t, got[0].names, "127.0.0.1:7421", "localhost resolved")
	for _, ja := range got[1:] {
		assert.Equal(t, []string{ja.addr}, ja.names, "%s kept as it is", ja.addr)
	}
	named := []joinAddr{{addr: "master-1:7421", names: []string{"127.0.0.1:7421", "[::1]:7421"}}}
	alive := map[string]*Member{"m1": {ID: "m1", GossipAddr: "127.0.0.1:7421", Status: StatusAlive}}
	assert.Empty(t, rejoinTargets(named, "", alive), "one of its addresses is alive")
	alive["m1"].Status = StatusDead
	assert.Equal(t, []string{"master-1:7421"}, rejoinTargets(named, "", alive), "joined again by its name")
}

// Push delivers a metadata update at once, where gossip would wait: with
// gossip, probes and the periodic exchange an hour apart, as when the
// packets carrying an update are lost, only the push can carry it.
func TestPushDeliversAnUpdateWithoutGossip(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	quiet := &Timings{ProbeInterval: time.Hour, ProbeTimeout: time.Second, GossipInterval: time.Hour,
		PushPullInterval: time.Hour, SuspicionMult: 4, RetransmitMult: 1, UDPBufferSize: 1400}
	a := freePort(t)
	meta := Meta{Role: RoleMaster, HTTPAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", Version: 1}
	m1, err := Start(Config{NodeID: "m1", BindAddr: a, Meta: meta, Slow: quiet})
	require.NoError(t, err)
	defer m1.Shutdown()
	m2, err := Start(Config{NodeID: "m2", BindAddr: freePort(t), Join: []string{a}, Meta: meta, Slow: quiet})
	require.NoError(t, err)
	defer m2.Shutdown()
	waitFor(t, "m1 to see m2", func() bool { _, ok := m1.Get("m2"); return ok })
	waitFor(t, "m2 to see m1", func() bool { _, ok := m2.Get("m1"); return ok })

	proposed := meta
	proposed.Bootstrap = "0123456789abcdef"
	require.NoError(t, m2.UpdateMeta(proposed))
	require.NoError(t, m2.Push("m1", "m2", "nobody"))
	waitFor(t, "m1 to see m2's proposal", func() bool { m, _ := m1.Get("m2"); return m.Meta.Bootstrap == proposed.Bootstrap })
}

// Anyone with the gossip key writes metadata: an address that is not a
// bare host:port (a scheme, above all, which would have a TLS leader dial
// a fake executor in the clear) is refused with a warning naming the
// node, and the member is not listed. A known member's refused update
// leaves it as it was.
func TestMetadataWithABadAddressIsNotListed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	var logs logBuffer
	m1, err := Start(Config{NodeID: "m1", BindAddr: freePort(t), Logger: logs.logger(),
		Meta: Meta{Role: RoleMaster, HTTPAddr: "127.0.0.1:7401", RaftAddr: "127.0.0.1:7411", Version: 1}})
	require.NoError(t, err)
	defer m1.Shutdown()
	ev := (*events)(m1)
	node := func(name string, m Meta) *memberlist.Node {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return &memberlist.Node{Name: name, Meta: b}
	}

	bad := map[string]Meta{
		"scheme":      {Role: RoleExecutor, HTTPAddr: "http://127.0.0.1:21099", Slots: 4, Version: 1},
		"tls-scheme":  {Role: RoleExecutor, HTTPAddr: "https://127.0.0.1:21099", Slots: 4, Version: 1},
		"path":        {Role: RoleExecutor, HTTPAddr: "127.0.0.1:21099/x", Version: 1},
		"userinfo":    {Role: RoleExecutor, HTTPAddr: "u@127.0.0.1:21099", Version: 1},
		"no-port":     {Role: RoleExecutor, HTTPAddr: "127.0.0.1", Version: 1},
		"empty":       {Role: RoleExecutor, Version: 1},
		"raft-scheme": {Role: RoleMaster, HTTPAddr: "127.0.0.1:7402", RaftAddr: "tcp://127.0.0.1:7412", Version: 1},
	}
	for name, m := range bad {
		ev.NotifyJoin(node(name, m))
		_, listed := m1.Get(name)
		require.False(t, listed, "%s (%+v) is listed", name, m)
		require.Contains(t, logs.String(), "node="+name+" ", "the warning names %s", name)
	}
	require.Contains(t, logs.String(), "gossip: metadata refused")
	require.Contains(t, logs.String(), "carries a scheme")
	require.Empty(t, m1.Role(RoleExecutor))

	// What nodes advertise: an IP (v4 or v6) or a name, and a port.
	good := map[string]string{"e4": "10.0.0.4:7431", "e6": "[2001:db8::6]:7431", "en": "exec-n.example:7431"}
	for name, addr := range good {
		ev.NotifyJoin(node(name, Meta{Role: RoleExecutor, HTTPAddr: addr, Slots: 4, Version: 1}))
		m, listed := m1.Get(name)
		require.True(t, listed, name)
		require.Equal(t, addr, m.Meta.HTTPAddr)
	}
	// A member whose update is refused is no longer listed: kept with its
	// earlier metadata, it stayed alive for good, since memberlist tells
	// of its departure with the metadata it last had, refused too.
	refused := Meta{Role: RoleExecutor, HTTPAddr: "http://10.0.0.9:7431", Slots: 4, Version: 1}
	ev.NotifyUpdate(node("e4", refused))
	_, listed := m1.Get("e4")
	require.False(t, listed, "a member whose metadata was refused is listed")
	ev.NotifyLeave(node("e4", refused))
	_, listed = m1.Get("e4")
	require.False(t, listed)
	ev.NotifyJoin(node("e4", Meta{Role: RoleExecutor, HTTPAddr: "10.0.0.4:7431", Slots: 4, Version: 1}))
	_, listed = m1.Get("e4")
	require.True(t, listed, "back with metadata that is taken")

	// A node does not start, or update, with metadata the others refuse.
	_, err = Start(Config{NodeID: "e9", BindAddr: freePort(t), Meta: Meta{Role: RoleExecutor, HTTPAddr: "http://127.0.0.1:1", Version: 1}})
	require.ErrorIs(t, err, transport.ErrPeerAddress)
	require.ErrorIs(t, m1.UpdateMeta(Meta{Role: RoleMaster, HTTPAddr: "127.0.0.1:7401", RaftAddr: "127.0.0.1", Version: 1}), transport.ErrPeerAddress)
}
