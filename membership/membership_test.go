package membership

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"jobmaster/internal/freeport"
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
	require.NoError(t, e2.Leave(time.Second))
	waitFor(t, "m1 to see e2 left", func() bool { m, _ := m1.Get("e2"); return m.Status == StatusLeft })
}

func TestJoinRetriesUntilTheOtherSideIsUp(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreProbe)
	a := freePort(t)
	e1, err := Start(Config{NodeID: "e1", BindAddr: freePort(t), Join: []string{a}, ReconnectInterval: 100 * time.Millisecond,
		Meta: Meta{Role: RoleExecutor, HTTPAddr: "x", Version: 1}})
	require.NoError(t, err)
	defer e1.Shutdown()
	m1, err := Start(Config{NodeID: "m1", BindAddr: a, Meta: Meta{Role: RoleMaster, HTTPAddr: "y", Version: 1}})
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
		Meta: Meta{Role: RoleMaster, HTTPAddr: "x", Version: 1}})
	require.NoError(t, err)
	defer m1.Shutdown()
	e1, err := Start(Config{NodeID: "e1", BindAddr: freePort(t), Join: []string{a}, Meta: Meta{Role: RoleExecutor, HTTPAddr: "y", Version: 1}})
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
		Meta: Meta{Role: RoleMaster, HTTPAddr: "x", Version: 1}})
	require.NoError(t, err)
	defer m1.Shutdown()
	e1, err := Start(Config{NodeID: "e1", BindAddr: freePort(t), Join: []string{a}, Meta: Meta{Role: RoleExecutor, HTTPAddr: "y", Version: 1}})
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
