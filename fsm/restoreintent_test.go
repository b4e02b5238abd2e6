package fsm

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// A restore announced and then abandoned: the next leader's
// establish-leadership names it, the masters whose state is the one
// before it carry on, and one whose state is the restore learns it
// diverged. A restore that took settles without a word.
func TestARestoreThatDidNotTakeIsNamedAndItsHolderDiverges(t *testing.T) {
	h := newHarness(t)
	before := h.s.Cluster()
	require.NoError(t, h.apply(&RestoreIntent{Fenced: h.fenced(), Cluster: "new"}).Err)
	require.Equal(t, "new", h.s.Restoring())

	// The announcement is part of the state: a snapshot keeps it.
	var buf bytes.Buffer
	_, err := h.s.Capture().WriteTo(&buf)
	require.NoError(t, err)
	copied, err := Restore(&buf)
	require.NoError(t, err)
	require.Equal(t, "new", copied.Restoring())

	// The master that began it installed the restored state, stamped
	// with the new id, and stopped before the others had it.
	restored := NewState()
	restored.RenameCluster("new")
	restored.SetRestoring("new")

	// The next leader's state is the one before the restore.
	aborting := &EstablishLeadership{Node: "m2", Aborted: "new"}
	require.NoError(t, h.apply(aborting).Err)
	require.Empty(t, h.s.Restoring())
	require.Empty(t, h.s.Diverged())
	require.Equal(t, before, h.s.Cluster())

	restored.ApplyEntry(restored.Index()+1, MustEncode(aborting))
	require.Equal(t, "new", restored.Diverged(), "the restore's holder learns its state is not the cluster's")

	// A restore that took: the leader's state is the restored one.
	took := NewState()
	took.RenameCluster("new")
	took.SetRestoring("new")
	took.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m1"}))
	require.Empty(t, took.Restoring())
	require.Empty(t, took.Diverged())
}

// A master whose state has another cluster id than the new leader's
// diverged, whatever the cause (an aborting entry it skipped); one whose
// state is the leader's does not; a leader naming the cluster expects
// nothing.
func TestAStateWithAnotherClusterThanTheLeadersDiverges(t *testing.T) {
	other := NewState()
	other.RenameCluster("restored")
	other.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m2", Expect: "cluster"}))
	require.Equal(t, "restored", other.Diverged())

	same := NewState()
	same.RenameCluster("cluster")
	same.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m2", Expect: "cluster"}))
	require.Empty(t, same.Diverged())

	first := NewState()
	first.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m1", Cluster: "cluster"}))
	require.Empty(t, first.Diverged())
	require.Equal(t, "cluster", first.Cluster())
}
