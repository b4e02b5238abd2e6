package master

import (
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/fsm"
)

// dropNoopAfterUserSnapshot simulates a kill -9 (or the OOM killer) of a
// leader during Raft's restore, after the user snapshot was written but
// before the no-op that follows it reached the log: it deletes, in the
// stopped master's Raft log, every entry at or past its latest snapshot's
// index. (A graceful stop, as in TestALeaderStoppedDuringARestoreNeverLeadsWithIt,
// leaves the no-op and so the hole that makes the master refuse entries.)
func dropNoopAfterUserSnapshot(t *testing.T, dataDir string) uint64 {
	t.Helper()
	dir := filepath.Join(dataDir, "raft")
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 3, hclog.NewNullLogger())
	require.NoError(t, err)
	list, err := snaps.List()
	require.NoError(t, err)
	require.NotEmpty(t, list)
	s := list[0].Index
	store, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	require.NoError(t, err)
	defer store.Close()
	last, err := store.LastIndex()
	require.NoError(t, err)
	t.Logf("snapshot at %d, log ends at %d: dropping [%d, %d]", s, last, s, last)
	if last >= s {
		require.NoError(t, store.DeleteRange(s, last))
	}
	return s
}

func othersOf(c *testCluster, l int) []int {
	var others []int
	for i := range c.masters {
		if i != l {
			others = append(others, i)
		}
	}
	return others
}

// restoreCutShort has the leader of c restore a backup taken before the
// job "after" was submitted, with the other masters stopped between the
// restore's announcement and Raft's restore, so that the restored state
// reaches no one but the leader; then stops the leader (killed: as kill
// -9 leaves it, without the entries past its restored snapshot) and starts
// the others again. It returns the old leader, the new one, and the
// cluster id before the restore, which the new leader's state still has.
func restoreCutShort(t *testing.T, c *testCluster, killed bool) (old, leader int, before string) {
	t.Helper()
	l := c.leader()
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/kept"), []byte(simpleJob)))
	backup := do(t, "GET", c.url(l, "/v1/operator/snapshot"), nil)
	require.Equal(t, http.StatusOK, backup.status)
	requireAccepted(t, do(t, "PUT", c.url(l, "/v1/jobs/after"), []byte(simpleJob)))
	before = decode[api.Cluster](t, do(t, "GET", c.url(l, "/v1/cluster"), nil)).ClusterID
	others := othersOf(c, l)
	c.masters[l].cfg.beforeRestore = func() {
		for _, i := range others {
			c.stop(i)
		}
	}
	r := do(t, "PUT", c.url(l, "/v1/operator/snapshot"), backup.body)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "the restore cannot commit: %s", r.body)
	require.Contains(t, string(r.body), "the restore's outcome is unknown")
	c.stop(l)
	if killed {
		dropNoopAfterUserSnapshot(t, c.cfgs[l].DataDir)
	}
	for _, i := range others {
		c.start(i)
	}
	n := c.leader()
	require.Equal(t, before, decode[api.Cluster](t, do(t, "GET", c.url(n, "/v1/cluster"), nil)).ClusterID, "the restore did not take")
	return l, n, before
}

// The variant an operator saw: the old leader, back, applies the next
// leader's entries (its log has no hole past its own last entry). Does it
// halt?

// A leader killed during Raft's restore, back with the restored state the
// others never committed, applies the next leader's entries: the one that
// names the restore as aborted halts it. Its Raft stops at once (it votes
// and leads no more, whoever embeds it), and it refuses to start again on
// that data directory.
func TestAKilledLeaderBackWithTheRestoreHalts(t *testing.T) {
	c := newTestCluster(t, 3)
	l, n, _ := restoreCutShort(t, c, true)
	c.start(l)
	select {
	case <-c.masters[l].Halted():
		require.ErrorContains(t, c.masters[l].HaltErr(), "did not commit")
	case <-time.After(30 * time.Second):
		t.Fatal("the master back with the restore that did not take has not halted")
	}
	require.Equal(t, raft.Shutdown, c.masters[l].Raft().State(), "a halted master's Raft votes and leads no more")
	for range 3 {
		c.stop(n)
		c.start(n)
		n = c.leader()
		require.NotEqual(t, l, n)
		requireAccepted(t, do(t, "PUT", c.url(n, "/v1/jobs/later"), []byte(simpleJob)))
	}
	c.stop(l)
	_, err := New(c.cfgs[l])
	require.ErrorContains(t, err, "this master halted", "the halt outlives a restart until the data directory is removed")
	c.masters[l] = nil
}

// One restore at a time: a second, while the first reads its upload, is
// refused with nothing done (two at once would have the state announce
// the second while the leader installs the first).
func TestOneRestoreAtATime(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	backup := do(t, "GET", c.url(l, "/v1/operator/snapshot"), nil)
	require.Equal(t, http.StatusOK, backup.status)
	pr, pw := io.Pipe()
	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("PUT", c.url(l, "/v1/operator/snapshot"), pr)
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- -1
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	go func() { _, _ = pw.Write(backup.body[:10]) }()
	waitFor(t, "the first restore's upload", func() bool {
		left, _ := filepath.Glob(filepath.Join(c.cfgs[l].DataDir, "restore-*.snap"))
		return len(left) == 1
	})
	r := do(t, "PUT", c.url(l, "/v1/operator/snapshot"), backup.body)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "another snapshot restore is in progress")
	pw.CloseWithError(io.ErrUnexpectedEOF)
	require.NotEqual(t, http.StatusOK, <-first, "the cut upload restored nothing")
	// Once the first's handler has returned (its answer may come first).
	waitFor(t, "a restore once the first ended", func() bool {
		r = do(t, "PUT", c.url(l, "/v1/operator/snapshot"), backup.body)
		require.Contains(t, []int{http.StatusOK, http.StatusConflict}, r.status, "%s", r.body)
		return r.status == http.StatusOK
	})
}

// A restore that takes: no master halts, every master settles the
// announcement, and a leader change right after settles it the same way.
func TestASuccessfulRestoreSettlesEverywhere(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	backup := do(t, "GET", c.url(l, "/v1/operator/snapshot"), nil)
	r := do(t, "PUT", c.url(l, "/v1/operator/snapshot"), backup.body)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	c.stop(l) // a leader change at once
	c.start(l)
	n := c.leader()
	c.waitSameState()
	cl := decode[api.Cluster](t, do(t, "GET", c.url(n, "/v1/cluster"), nil)).ClusterID
	for i, m := range c.masters {
		var rs, cc string
		m.FSM().Read(func(st *fsm.State) { rs, cc = st.Restoring(), st.Cluster() })
		require.Empty(t, rs, "m%d", i+1)
		require.Equal(t, cl, cc)
		require.Nil(t, m.HaltErr())
	}
}

// Raft refuses the restore before installing anything (leadership moved
// after the announcement): the answer says nothing was restored.
func TestARestoreRaftRefusesSaysNothingWasRestored(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	backup := do(t, "GET", c.url(l, "/v1/operator/snapshot"), nil)
	before := decode[api.Cluster](t, do(t, "GET", c.url(l, "/v1/cluster"), nil)).ClusterID
	m := c.masters[l]
	m.cfg.beforeRestore = func() {
		require.NoError(t, m.Raft().LeadershipTransfer().Error())
	}
	r := do(t, "PUT", c.url(l, "/v1/operator/snapshot"), backup.body)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "nothing was restored")
	n := c.leader()
	require.Equal(t, before, decode[api.Cluster](t, do(t, "GET", c.url(n, "/v1/cluster"), nil)).ClusterID, "nothing was restored")
}
