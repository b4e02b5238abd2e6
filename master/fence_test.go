package master

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"jobmaster/fsm"
)

// holdTransport is a leader's transport that can hold the answer to one
// heartbeat: the follower has answered it (in the leader's term), but
// Raft reads the answer only when the test lets it, as a leader paused
// with the answer in its socket reads it after it resumes.
type holdTransport struct {
	*raft.InmemTransport
	mu      sync.Mutex
	holdTo  raft.ServerAddress // the follower whose next heartbeat answer is held
	held    chan struct{}      // closed once an answer is held
	release chan struct{}      // closed to let the held answer through
	watchTo raft.ServerAddress // a request to it closes sent
	sent    chan struct{}
}

func (h *holdTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := h.InmemTransport.AppendEntries(id, target, args, resp)
	h.mu.Lock()
	var wait chan struct{}
	if target == h.holdTo && len(args.Entries) == 0 && err == nil && resp.Success {
		h.holdTo = ""
		close(h.held)
		wait = h.release
	}
	if target == h.watchTo {
		h.watchTo = ""
		close(h.sent)
	}
	h.mu.Unlock()
	if wait != nil {
		<-wait
	}
	return err
}

// holdNext holds the next successful heartbeat answer from to.
func (h *holdTransport) holdNext(to raft.ServerAddress) (held, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holdTo, h.held, h.release = to, make(chan struct{}), make(chan struct{})
	return h.held, h.release
}

// watchNext returns a channel closed at the next request to to.
func (h *holdTransport) watchNext(to raft.ServerAddress) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchTo, h.sent = to, make(chan struct{})
	return h.sent
}

type fenceNode struct {
	id    raft.ServerID
	trans *raft.InmemTransport
	raft  *raft.Raft
	fsm   *fsm.FSM
}

// TestAFenceOnADeposedLeaderFailsDespiteAStaleAnswer: a leader holds a
// follower's answer to a heartbeat it sent before the others elected a new
// leader (the paused leader of chaos seed 1623, which answered 404 for an
// acknowledged job just after it resumed). A consistent read's fence must
// fail there. Raft's VerifyLeader, which leaderRead used before, counts
// the stale answer as a vote and confirms the deposed leader.
func TestAFenceOnADeposedLeaderFailsDespiteAStaleAnswer(t *testing.T) {
	// The old leader's lease is long, so that it does not step down on its
	// own while the others elect; the followers' timeouts are shorter.
	timeouts := map[raft.ServerID]time.Duration{"m1": 4 * time.Second, "m2": time.Second, "m3": time.Second}
	nodes := make([]*fenceNode, 0, 3)
	var hold *holdTransport
	var servers []raft.Server
	for _, id := range []raft.ServerID{"m1", "m2", "m3"} {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(id))
		nodes = append(nodes, &fenceNode{id: id, trans: tr, fsm: fsm.New()})
		servers = append(servers, raft.Server{ID: id, Address: addr})
	}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				a.trans.Connect(raft.ServerAddress(b.id), b.trans)
			}
		}
	}
	for _, n := range nodes {
		c := raft.DefaultConfig()
		c.LocalID = n.id
		c.HeartbeatTimeout = timeouts[n.id]
		c.ElectionTimeout = timeouts[n.id]
		c.LeaderLeaseTimeout = timeouts[n.id]
		c.Logger = hclog.NewNullLogger()
		var tr raft.Transport = n.trans
		if n.id == "m1" {
			hold = &holdTransport{InmemTransport: n.trans}
			tr = hold
		}
		store := raft.NewInmemStore()
		snaps := raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(c, store, store, snaps, tr, raft.Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		r, err := raft.NewRaft(c, n.fsm, store, store, snaps, tr)
		if err != nil {
			t.Fatal(err)
		}
		n.raft = r
		t.Cleanup(func() { _ = r.Shutdown().Error() })
	}
	m1 := nodes[0]
	// m1 (the longest timeouts) may not win the first election: hand it
	// the leadership until it leads.
	waitFor(t, "m1 to lead", func() bool {
		if m1.raft.State() == raft.Leader {
			return true
		}
		for _, n := range nodes[1:] {
			if n.raft.State() == raft.Leader {
				_ = n.raft.LeadershipTransferToServer("m1", "m1").Error()
			}
		}
		return false
	})
	p := newProposer(m1.raft)
	t.Cleanup(p.close)
	if err := p.Fence(context.Background()); err != nil {
		t.Fatalf("a fence on a leader with its followers: %v", err)
	}
	term := m1.raft.Stats()["term"]

	// m2's answer to the next heartbeat is held, then m1 is cut off and
	// m2 and m3 elect a leader of a newer term.
	held, release := hold.holdNext("m2")
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no heartbeat answer from m2 held")
	}
	for _, n := range nodes[1:] {
		m1.trans.Disconnect(raft.ServerAddress(n.id))
		n.trans.Disconnect("m1")
	}
	waitFor(t, "m2 or m3 to lead a newer term", func() bool {
		for _, n := range nodes[1:] {
			if n.raft.State() == raft.Leader && n.raft.Stats()["term"] != term {
				return true
			}
		}
		return false
	})
	if m1.raft.State() != raft.Leader {
		t.Fatalf("m1 stepped down before the read (state %s): the test proves nothing", m1.raft.State())
	}

	// The read begins; once m1 has asked m3 (the fence's entry, or a
	// verification's heartbeat), m2's stale answer arrives, and m1 is
	// joined to the others again.
	sent := hold.watchNext("m3")
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- p.Fence(ctx)
	}()
	select {
	case <-sent:
	case <-time.After(30 * time.Second):
		t.Fatal("m1 sent nothing to m3")
	}
	close(release)
	for _, n := range nodes[1:] {
		m1.trans.Connect(raft.ServerAddress(n.id), n.trans)
		n.trans.Connect("m1", m1.trans)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a fence on a deposed leader succeeded: a consistent read there would miss the new leader's writes")
		}
		if !retryable(err) {
			t.Fatalf("the fence failed with %v, which leaderRead does not hand to the next leader", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the fence never returned")
	}
}
