package fsm

// A snapshot restore (PUT /v1/operator/snapshot) gives the restored state a
// new cluster id, and the leader installs it through Raft's own restore:
// its state is replaced at once, and the others' when they install the
// snapshot it sends them. A leader that stops before a majority has it
// leaves one master holding a state the others never committed. Left
// alone, that master applies the others' entries on top of it, and once it
// leads, the executors follow its new cluster id and refuse every other
// master. So a restore is announced first: RestoreIntent, committed before
// the leader replaces its state, records the id the restored state will
// have (and the restored state records it too). The next leader's
// establish-leadership settles it: its own state has that id (the restore
// took), or the leader names the id as aborted, and a master whose state
// has it learns it holds a state that never committed (Diverged) and stops.

// RestoreIntent announces a snapshot restore whose state will have
// cluster id Cluster.
type RestoreIntent struct {
	Fenced
	Cluster string `codec:"c"`
}

func (*RestoreIntent) Type() CommandType { return TypeRestoreIntent }

func (s *State) applyRestoreIntent(c *RestoreIntent) Result {
	s.restoring = c.Cluster
	return Result{}
}

// settleRestore is establish-leadership's part in a restore: the intent is
// settled, and a state whose cluster id the new leader names as a restore
// that did not take is this master's alone.
func (s *State) settleRestore(c *EstablishLeadership) {
	switch {
	case c.Aborted != "" && c.Aborted == s.cluster:
		s.diverged = c.Aborted
	case c.Expect != "" && c.Expect != s.cluster && c.Cluster == "":
		// Not the leader's state, whatever the cause: a restore that did
		// not take, whose aborting entry this master skipped.
		s.diverged = s.cluster
	}
	s.restoring = ""
}

// Restoring is the cluster id of a restore announced and not settled yet
// by a leader ("" if none).
func (s *State) Restoring() string { return s.restoring }

// SetRestoring records, in a state about to be restored, the id of the
// restore that makes it (RestoreIntent).
func (s *State) SetRestoring(id string) { s.restoring = id }

// Diverged is, on a master whose state is a restore the cluster's leader
// named as aborted, that restore's cluster id: this master's state is not
// the cluster's, and it must not serve or lead. "" otherwise.
func (s *State) Diverged() string { return s.diverged }
