package master

import (
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/fsm"
)

// A master back from a crash during a snapshot restore may hold the
// restored state while the others never committed it (fsm/restoreintent.go).
// When it applies the next leader's entries it learns so and halts
// (watchDivergence). When its log lacks the entry before the restored
// snapshot it refuses those entries instead, and stays behind: its state
// then keeps the restore's cluster id as announced and unsettled, which a
// restore that took has only until its leader's next epoch (seconds). So
// a follower whose state has been so for unsettledRestoreAfter says what
// it likely is, and what to do.

// unsettledRestoreAfter is how long a follower's state may be an unsettled
// restore before it warns.
const unsettledRestoreAfter = time.Minute

// unsettledRestore decides the warning: given the state's cluster id and
// the restore it announces, whether this master follows a known leader,
// since when the state has been so (zero: not so until now), and now, it
// returns the new since and whether to warn (at most every
// unsettledRestoreAfter, as since restarts).
func unsettledRestore(cluster, restoring string, following bool, since, now time.Time) (time.Time, bool) {
	if restoring == "" || restoring != cluster || !following {
		return time.Time{}, false
	}
	if since.IsZero() {
		return now, false
	}
	if now.Sub(since) >= unsettledRestoreAfter {
		return now, true
	}
	return since, false
}

// watchUnsettledRestore checks unsettledRestore every few seconds.
func (m *Master) watchUnsettledRestore() {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	var since time.Time
	for {
		select {
		case <-m.stop:
			return
		case <-m.halted:
			return
		case <-t.C:
		}
		var cluster, restoring string
		m.fsm.Read(func(st *fsm.State) { cluster, restoring = st.Cluster(), st.Restoring() })
		_, leader := m.raft.LeaderWithID()
		var warn bool
		since, warn = unsettledRestore(cluster, restoring, m.raft.State() == raft.Follower && leader != "", since, m.cfg.Now())
		if warn {
			m.log.Warn("this master's state is a snapshot restore (cluster "+cluster+") that no leader has settled for a minute: if 'jobmaster members' shows another cluster id, it holds a restore that did not take and stays behind; remove its data directory and start it again (docs/operations.md, \"Restore\")",
				"leader", string(leader), "data_dir", m.cfg.DataDir)
		}
	}
}
