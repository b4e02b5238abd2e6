package master

import (
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/membership"
)

// watchMembership runs for the master's whole life. Until the master belongs
// to a cluster, it gossips the set of masters it proposes to bootstrap,
// bootstraps it when it is the lowest id of the set and the set agrees
// (bootstrap.go), or notices being added to a cluster; then it gossips that
// it is in a cluster, so no one bootstraps around it.
func (m *Master) watchMembership() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		changed := m.gossip.Changed()
		m.mu.Lock()
		in := m.inCluster
		m.mu.Unlock()
		if !in {
			m.tryJoinCluster()
		}
		select {
		case <-m.stop:
			return
		case <-changed:
		case <-t.C:
		}
	}
}

func (m *Master) tryJoinCluster() {
	if m.inConfiguration() {
		m.markInCluster("added to a cluster")
		return
	}
	masters := m.gossip.Role(membership.RoleMaster)
	proposal, servers, ok := bootstrapDecision(m.cfg.NodeID, masters, m.cfg.BootstrapExpect)
	m.propose(proposal, masters)
	if !ok {
		return
	}
	if err := m.verifyServers(servers); err != nil {
		m.log.Warn("not bootstrapping yet", "err", err)
		return
	}
	err := m.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && err != raft.ErrCantBootstrap {
		m.log.Error("bootstrap", "err", err)
		return
	}
	m.markInCluster("bootstrapped")
	m.log.Info("cluster bootstrapped", "servers", len(servers))
}

// propose gossips the bootstrap proposal, when it changed, and pushes it
// to the other masters: the lowest id bootstraps only once it has every
// other's proposal, and a gossiped update lost on the way would hold the
// new cluster back until the next periodic state exchange (5 s; new dev
// clusters took 6-10 s to elect in 3 starts of 11).
func (m *Master) propose(proposal string, masters []membership.Member) {
	m.mu.Lock()
	changed := m.proposal != proposal
	m.proposal = proposal
	m.mu.Unlock()
	if !changed {
		return
	}
	if err := m.gossip.UpdateMeta(m.meta()); err != nil {
		m.log.Warn("gossip metadata", "err", err)
	}
	if proposal == "" {
		return
	}
	ids := make([]string, 0, len(masters))
	for _, o := range masters {
		ids = append(ids, o.ID)
	}
	if err := m.gossip.Push(ids...); err != nil {
		m.log.Debug("pushing the bootstrap proposal", "err", err)
	}
}

func (m *Master) inConfiguration() bool {
	f := m.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(m.cfg.NodeID) {
			return true
		}
	}
	return false
}

func (m *Master) markInCluster(why string) {
	m.mu.Lock()
	m.inCluster = true
	m.mu.Unlock()
	if err := m.gossip.UpdateMeta(m.meta()); err != nil {
		m.log.Warn("gossip metadata", "err", err)
	}
	m.log.Info("in cluster", "how", why)
}
