package master

import (
	"sort"

	"github.com/hashicorp/raft"

	"jobmaster/membership"
)

// bootstrapServers decides, from the masters gossip knows (this one
// included), whether to form a new cluster and with whom. It bootstraps
// only when at least expect masters are alive and none of them already
// belongs to a cluster, with every alive master seen, sorted by id so that
// every master that decides at the same time decides the same.
func bootstrapServers(masters []membership.Member, expect int) ([]raft.Server, bool) {
	if expect <= 0 {
		return nil, false
	}
	var servers []raft.Server
	for _, m := range masters {
		if m.Meta.Role != membership.RoleMaster || m.Status != membership.StatusAlive {
			continue
		}
		if m.Meta.InCluster {
			return nil, false
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Meta.RaftAddr)})
	}
	if len(servers) < expect {
		return nil, false
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
	return servers, true
}
