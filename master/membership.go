package master

import (
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/internal/raftguard"
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
		m.releaseVotesWhenSafe()
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
	if m.rp.guard.HoldingVotes() && founder(m.cfg.NodeID, masters, m.cfg.BootstrapExpect) {
		// Durably first: a founder restarted before its first entry votes
		// too, or two such would hold a new cluster without a leader.
		if err := markVoter(m.rp.dir); err != nil {
			m.log.Warn("not proposing a cluster yet: the vote marker could not be written", "err", err)
			return // a founder that proposes must vote, after a restart too
		}
		if m.rp.guard.ReleaseVotes() {
			m.log.Info("voting: a founder of a new cluster")
		}
	}
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

// releaseVotesWhenSafe lets a master that started with an empty Raft log
// vote once its log holds everything a leader had committed when it last
// named its commit index (raftguard.CaughtUp): before, it may lack entries
// it acknowledged before its data was lost, and its vote could elect a
// leader without them.
func (m *Master) releaseVotesWhenSafe() {
	g := m.rp.guard
	if !m.rp.noMarker && m.raft.LastIndex() > 0 {
		// The log holds an entry: a restart finds Raft state, and the
		// marker would only outlive a later loss of the log alone.
		m.rp.noMarker = dropVoteMarker(m.rp.dir) == nil
	}
	if !g.HoldingVotes() {
		return
	}
	last, commit := m.raft.LastIndex(), g.LeaderCommit()
	if raftguard.CaughtUp(last, commit) && g.ReleaseVotes() {
		m.log.Info("voting: the log holds what a leader had committed", "last_index", last, "leader_commit", commit)
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
