package master

import (
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/membership"
)

// reconcileVoters adds masters that gossip shows alive but that are not in
// the Raft configuration (a new master, or one replaced on a new address),
// and removes masters that left gossip gracefully.
func (s *session) reconcileVoters() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		changed := s.m.gossip.Changed()
		s.reconcileVotersOnce()
		select {
		case <-s.ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

func (s *session) reconcileVotersOnce() {
	m := s.m
	f := m.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	have := make(map[raft.ServerID]raft.ServerAddress)
	for _, srv := range f.Configuration().Servers {
		have[srv.ID] = srv.Address
	}
	for _, mem := range m.gossip.Role(membership.RoleMaster) {
		id, addr := raft.ServerID(mem.ID), raft.ServerAddress(mem.Meta.RaftAddr)
		cur, in := have[id]
		switch {
		case mem.Status == membership.StatusAlive && (!in || cur != addr):
			if err := m.verifyServer(id, addr); err != nil {
				m.log.Warn("not adding a voter", "peer", id, "err", err)
			} else if err := m.raft.AddVoter(id, addr, 0, 5*time.Second).Error(); err != nil {
				m.log.Warn("add voter", "peer", id, "err", err)
			} else {
				m.log.Info("voter added", "peer", id, "raft", addr)
			}
		case mem.Status == membership.StatusLeft && in && id != raft.ServerID(m.cfg.NodeID):
			if err := m.raft.RemoveServer(id, 0, 5*time.Second).Error(); err != nil {
				m.log.Warn("remove server", "peer", id, "err", err)
			} else {
				m.log.Info("server removed after leaving", "peer", id)
			}
		}
	}
}
