package master

import (
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/membership"
	"jobmaster/succession"
)

// reconcileVoters adds masters that gossip shows alive but that are not in
// the Raft configuration (a new master, or one replaced on a new address)
// as non-voters, makes them voters once their logs have caught up
// (staging.go), and removes masters that left gossip gracefully.
func (s *session) reconcileVoters() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	st := newStager(s.m.cfg.StagingStable)
	for {
		changed := s.m.gossip.Changed()
		s.reconcileVotersOnce(st)
		select {
		case <-s.ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

func (s *session) reconcileVotersOnce(st *stager) {
	m := s.m
	f := m.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	have := make(map[raft.ServerID]raft.Server)
	for _, srv := range f.Configuration().Servers {
		have[srv.ID] = srv
	}
	staged := make(map[raft.ServerID]bool)
	for _, mem := range m.gossip.Role(membership.RoleMaster) {
		id, addr := raft.ServerID(mem.ID), raft.ServerAddress(mem.Meta.RaftAddr)
		cur, in := have[id]
		switch {
		case mem.Status == membership.StatusAlive && (!in || cur.Address != addr):
			if err := m.verifyServer(id, addr); err != nil {
				m.log.Warn("not adding a voter", "peer", id, "err", err)
				continue
			}
			if in && cur.Suffrage == raft.Voter {
				s.addVoter(id, addr, "voter's address changed") // it stays one
				continue
			}
			if err := m.raft.AddNonvoter(id, addr, 0, 5*time.Second).Error(); err != nil {
				m.log.Warn("add non-voter", "peer", id, "err", err)
			} else {
				m.log.Info("master staged: a non-voter until its log has caught up", "peer", id, "raft", addr)
			}
		case mem.Status == membership.StatusAlive && cur.Suffrage == raft.Nonvoter:
			staged[id] = true
			if st.promote(id, s.caughtUp(id, mem.Meta.HTTPAddr), m.cfg.Now()) {
				s.addVoter(id, addr, "voter added")
			}
		case mem.Status == membership.StatusLeft && in && id != raft.ServerID(m.cfg.NodeID):
			if err := m.raft.RemoveServer(id, 0, 5*time.Second).Error(); err != nil {
				m.log.Warn("remove server", "peer", id, "err", err)
			} else {
				m.log.Info("server removed after leaving", "peer", id)
			}
		}
	}
	st.forget(staged)
}

// addVoter makes master id at addr a voter, and logs it as done.
func (s *session) addVoter(id raft.ServerID, addr raft.ServerAddress, done string) {
	if err := s.m.raft.AddVoter(id, addr, 0, 5*time.Second).Error(); err != nil {
		s.m.log.Warn("add voter", "peer", id, "err", err)
		return
	}
	s.m.log.Info(done, "peer", id, "raft", addr)
}

// caughtUp asks the staged master id, at httpAddr, for its log position
// and compares it with this leader's.
func (s *session) caughtUp(id raft.ServerID, httpAddr string) bool {
	w := s.m.succession
	lead, err := w.position()
	if err != nil {
		return false
	}
	a, err := w.fetchPosition(httpAddr, string(id), "")
	if err != nil {
		s.m.log.Debug("staged master's position unknown", "peer", id, "err", err)
		return false
	}
	return caughtUp(succession.Position{ID: a.ID, Term: a.Term, Index: a.Index}, a.HoldsVotes, lead)
}
