package master

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"jobmaster/fsm"
	"jobmaster/jobspec"
)

// A proposal made after the proposer stopped is answered errShutdown,
// never left waiting: the queue has room, so without the check half of
// them would sit in it with nothing to take them.
func TestProposeAfterCloseIsRefused(t *testing.T) {
	p := newProposer(nil) // run takes nothing from the queue before it stops, so Raft is never used
	p.close()
	for i := 0; i < 100; i++ {
		done := make(chan error, 1)
		go func() {
			_, _, err := p.Propose(context.Background())
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, errShutdown)
		case <-time.After(2 * time.Second):
			t.Fatalf("proposal %d after close is still waiting", i)
		}
	}
}

// Proposals heavier together than maxEntryWeight go in entries of their
// own, however many wait at once.
func TestHeavyProposalsTakeAnEntryEach(t *testing.T) {
	c := newTestCluster(t, 1)
	p := c.masters[c.leader()].prop
	const n = 6
	type outcome struct {
		index uint64
		err   error
	}
	out := make(chan outcome, n)
	for range n {
		go func() {
			_, idx, err := p.ProposeSubmissions(context.Background(), maxEntryWeight*6/10, nil)
			out <- outcome{idx, err}
		}()
	}
	seen := map[uint64]bool{}
	for range n {
		o := <-out
		require.NoError(t, o.err)
		require.False(t, seen[o.index], "two heavy proposals in entry %d", o.index)
		seen[o.index] = true
	}
}

// An entry the leader could not write to its own log (hashicorp/raft
// answers it with the log store's error, unwrapped, and steps down) was
// neither written nor sent: it goes to the next leader, as a request
// whose leader left does. Raft's own errors stay as they are.
func TestALeadersLogStoreErrorIsRetried(t *testing.T) {
	disk := applyError(fmt.Errorf("unable to store logs within log store, err: %q", "write raft.db: no space left on device"))
	require.ErrorIs(t, disk, errLogStore)
	require.True(t, retryable(disk))
	require.Contains(t, disk.Error(), "no space left on device")
	for _, err := range []error{raft.ErrLeadershipLost, raft.ErrNotLeader, raft.ErrEnqueueTimeout} {
		require.Equal(t, err, applyError(err))
		require.True(t, retryable(applyError(err)), "%v", err)
	}
}

// An entry waits for the submissions of the callers the last one
// answered, and for those that queued meanwhile, for at most half a
// commit (and maxConvoyWait); with nothing to go by it does not wait.
func TestConvoyWaitsForTheCallersComingBack(t *testing.T) {
	want, wait := convoy{}.hold(2)
	require.Equal(t, 2, want)
	require.Zero(t, wait, "no entry yet: nothing to wait for")

	// The leader's own caller went alone; the two relayed ones queued
	// behind it. The next entry waits for all three.
	want, wait = convoy{last: 1, commit: 2 * time.Millisecond}.hold(2)
	require.Equal(t, 3, want)
	require.Equal(t, time.Millisecond, wait)

	// Three went together and none queued: three again.
	want, _ = convoy{last: 3, commit: 2 * time.Millisecond}.hold(0)
	require.Equal(t, 3, want)

	// A slow commit does not make callers return any slower.
	_, wait = convoy{last: 3, commit: time.Second}.hold(0)
	require.Equal(t, maxConvoyWait, wait)
}

// A proposal whose caller's context has ended is not committed, though
// the caller is told it was not: neither one made after the context ended
// (the enqueue raced the context, and about half were committed) nor one
// whose context ended while it was queued. A stopped leader session's
// decisions must not land after it stopped.
func TestAProposalWhoseCallerHasGoneIsNotCommitted(t *testing.T) {
	c := newTestCluster(t, 1)
	m := c.masters[c.leader()]
	s := m.currentSession()
	spec, err := jobspec.Parse([]byte(simpleJob))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 40 {
		_, _, err := m.prop.Propose(ctx, &fsm.SubmitJob{Fenced: s.fenced(), ID: fmt.Sprintf("late-%d", i), Spec: spec})
		require.ErrorIs(t, err, context.Canceled)
	}
	require.NoError(t, m.prop.Fence(context.Background()))
	m.fsm.Read(func(st *fsm.State) {
		for i := range 40 {
			require.False(t, st.HasJob(fmt.Sprintf("late-%d", i)), "late-%d was committed", i)
		}
	})

	// Queued, then its caller went: run answers it and proposes nothing
	// (this proposer has no Raft to propose to).
	p := &proposer{queue: make(chan *proposal, 1), stop: make(chan struct{}), done: make(chan struct{})}
	pr := &proposal{ctx: ctx, reply: make(chan proposalReply, 1)}
	p.queue <- pr
	go p.run()
	require.ErrorIs(t, (<-pr.reply).err, context.Canceled)
	p.close()
}
