package master

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sort"

	"github.com/hashicorp/raft"

	"jobmaster/membership"
)

// The bootstrap rule (docs/architecture.md, "Bootstrap"). Masters started
// with --bootstrap-expect N form one cluster, however many start at once:
//
//   - each master proposes the first N masters it sees (alive, in no
//     cluster, lowest ids first) and gossips a digest of that set (ids and
//     Raft addresses; Meta.Bootstrap);
//   - only the lowest id of the set bootstraps it, and only once every
//     master of the set gossips the same digest: the first N agree;
//   - every other master waits to be added (the leader adds the masters it
//     sees that are not voters, reconcileVoters), and none bootstraps once
//     it sees a master in a cluster.
//
// Two clusters would need two sets with no master in common whose members
// each never saw the other set's lowest master, which gossip views that
// only grow while the masters start cannot give with fewer than 2N masters.

// bootstrapDecision decides, for master self, from the masters gossip knows
// (self included), what to propose (the digest to gossip; "" when there
// is nothing to propose) and whether to bootstrap now, with which servers.
func bootstrapDecision(self string, masters []membership.Member, expect int) (proposal string, servers []raft.Server, ok bool) {
	set := bootstrapSet(masters, expect)
	if set == nil {
		return "", nil, false
	}
	for _, m := range set {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Meta.RaftAddr)})
	}
	proposal = digestOf(servers)
	if set[0].ID != self {
		return proposal, nil, false
	}
	for _, m := range set[1:] {
		if m.Meta.Bootstrap != proposal {
			return proposal, nil, false
		}
	}
	return proposal, servers, true
}

// bootstrapSet is the set of masters to bootstrap that gossip shows (the
// first expect alive masters by id, none of them in a cluster), or nil.
func bootstrapSet(masters []membership.Member, expect int) []membership.Member {
	if expect <= 0 {
		return nil
	}
	var alive []membership.Member
	for _, m := range masters {
		if m.Meta.Role != membership.RoleMaster || m.Status != membership.StatusAlive {
			continue
		}
		if m.Meta.InCluster {
			return nil
		}
		alive = append(alive, m)
	}
	if len(alive) < expect {
		return nil
	}
	sort.Slice(alive, func(i, j int) bool { return alive[i].ID < alive[j].ID })
	return alive[:expect]
}

// founder reports whether self is a master of the set gossip shows to
// bootstrap: one of a new cluster, which has acknowledged nothing.
func founder(self string, masters []membership.Member, expect int) bool {
	return slices.ContainsFunc(bootstrapSet(masters, expect), func(m membership.Member) bool { return m.ID == self })
}

// digestOf names a set of servers in 16 hex digits: gossip metadata is
// small, and node ids may be long.
func digestOf(servers []raft.Server) string {
	h := sha256.New()
	for _, s := range servers {
		h.Write([]byte(s.ID))
		h.Write([]byte{0})
		h.Write([]byte(s.Address))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
