package master

import (
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"jobmaster/membership"
)

// Dead-master cleanup (--dead-master-cleanup; docs/operations.md,
// "Removing a master"). A voter the leader has not heard of for longer
// than the threshold (gossip says it failed, or no longer knows it) is
// removed from the Raft configuration, so that a master gone for good
// stops counting towards the quorum. Never below the quorum of the
// configured size: with --bootstrap-expect 3, at most down to 2 voters.

// deadMasters decides which masters to remove at now: those other than
// self whose last contact is threshold or more ago; of the voters, oldest
// first, as many as leave at least floor voters (a non-voter, a master
// staged and lost before it voted, counts for no quorum). lastContact
// holds, per master, when it was last known alive; a master missing from
// it counts as alive now.
func deadMasters(servers []raft.Server, self raft.ServerID, lastContact map[raft.ServerID]time.Time, now time.Time, threshold time.Duration, floor int) []raft.ServerID {
	if threshold <= 0 {
		return nil
	}
	voters := 0
	type dead struct {
		id   raft.ServerID
		last time.Time
	}
	var gone []dead
	var out []raft.ServerID // dead non-voters: all of them
	for _, s := range servers {
		last, ok := lastContact[s.ID]
		isDead := s.ID != self && ok && now.Sub(last) >= threshold
		switch {
		case s.Suffrage != raft.Voter:
			if isDead {
				out = append(out, s.ID)
			}
		case isDead:
			voters++
			gone = append(gone, dead{s.ID, last})
		default:
			voters++
		}
	}
	sort.Slice(gone, func(i, j int) bool {
		if !gone[i].last.Equal(gone[j].last) {
			return gone[i].last.Before(gone[j].last)
		}
		return gone[i].id < gone[j].id
	})
	for _, d := range gone {
		if voters-1 < floor {
			break
		}
		voters--
		out = append(out, d.id)
	}
	return out
}

// quorumOf is the quorum of a configuration of n voters.
func quorumOf(n int) int { return n/2 + 1 }

// contactTracker remembers, through one leadership session, when each
// voter was last known alive: gossip's word when it has one, else when the
// session first missed it.
type contactTracker struct {
	missingSince map[raft.ServerID]time.Time
}

// lastContact gathers the input of deadMasters at now.
func (c *contactTracker) lastContact(servers []raft.Server, members []membership.Member, now time.Time) map[raft.ServerID]time.Time {
	byID := make(map[string]membership.Member, len(members))
	for _, m := range members {
		byID[m.ID] = m
	}
	out := make(map[raft.ServerID]time.Time, len(servers))
	for _, s := range servers {
		m, ok := byID[string(s.ID)]
		switch {
		case ok && m.Status == membership.StatusAlive:
			out[s.ID] = now
			delete(c.missingSince, s.ID)
		case ok:
			out[s.ID] = m.Since
			delete(c.missingSince, s.ID)
		default:
			since, seen := c.missingSince[s.ID]
			if !seen {
				since = now
				c.missingSince[s.ID] = now
			}
			out[s.ID] = since
		}
	}
	return out
}

// cleanupDeadMasters removes dead masters from the Raft configuration
// (deadMasters), checking every second, while the session lasts.
func (s *session) cleanupDeadMasters() {
	m := s.m
	threshold := m.cfg.DeadMasterCleanup
	if threshold <= 0 {
		return
	}
	size := m.cfg.BootstrapExpect
	if f := m.raft.GetConfiguration(); size <= 0 && f.Error() == nil {
		size = len(f.Configuration().Servers)
	}
	floor := quorumOf(size)
	tracker := &contactTracker{missingSince: make(map[raft.ServerID]time.Time)}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		f := m.raft.GetConfiguration()
		if f.Error() != nil {
			continue
		}
		servers := f.Configuration().Servers
		now := m.cfg.Now()
		last := tracker.lastContact(servers, m.gossip.Role(membership.RoleMaster), now)
		for _, id := range deadMasters(servers, raft.ServerID(m.cfg.NodeID), last, now, threshold, floor) {
			if err := m.raft.RemoveServer(id, 0, 5*time.Second).Error(); err != nil {
				m.log.Warn("dead master cleanup: remove server", "peer", id, "err", err)
				break
			}
			m.log.Warn("dead master removed from the Raft configuration", "peer", id, "silent_for", now.Sub(last[id]).Round(time.Second),
				"threshold", threshold, "voters_at_least", floor)
		}
	}
}
