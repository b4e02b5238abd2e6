package master

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"

	"jobmaster/membership"
)

// bootstrapRule is a bootstrap decision as bootstrapDecision makes it.
type bootstrapRule func(self string, masters []membership.Member, expect int) (string, []raft.Server, bool)

// seeAllRule is the rule before this one: bootstrap with every alive master
// seen once there are expect of them and none is in a cluster.
func seeAllRule(self string, masters []membership.Member, expect int) (string, []raft.Server, bool) {
	var servers []raft.Server
	for _, m := range masters {
		if m.Meta.InCluster {
			return "", nil, false
		}
		servers = append(servers, raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Meta.RaftAddr)})
	}
	if expect <= 0 || len(servers) < expect {
		return "", nil, false
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
	if !slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == raft.ServerID(self) }) {
		return "", nil, false
	}
	return "", servers, true
}

// bootstrapWorld is masters started at once: each sees a growing set of
// the others (gossip views only grow while they start) and each other's
// metadata as it was when it last heard of them, possibly stale.
type bootstrapWorld struct {
	n, expect int
	rule      bootstrapRule
	sees      [][]bool              // sees[i][j]: i knows j
	heard     [][]membership.Meta   // heard[i][j]: j's metadata as i last heard it
	meta      []membership.Meta     // what each gossips now
	boots     map[int][]raft.Server // who bootstrapped, with what
}

func newBootstrapWorld(n, expect int, rule bootstrapRule) *bootstrapWorld {
	w := &bootstrapWorld{n: n, expect: expect, rule: rule, boots: map[int][]raft.Server{}}
	for i := 0; i < n; i++ {
		w.sees = append(w.sees, make([]bool, n))
		w.sees[i][i] = true
		w.heard = append(w.heard, make([]membership.Meta, n))
		w.meta = append(w.meta, membership.Meta{Role: membership.RoleMaster, RaftAddr: w.id(i) + ":1"})
	}
	return w
}

func (w *bootstrapWorld) id(i int) string { return fmt.Sprintf("m%d", i) }

// decide runs master i's decision on its view, and carries it out.
func (w *bootstrapWorld) decide(i int) {
	if w.meta[i].InCluster {
		return
	}
	var view []membership.Member
	for j := 0; j < w.n; j++ {
		if !w.sees[i][j] {
			continue
		}
		meta := w.heard[i][j]
		if j == i {
			meta = w.meta[i]
		}
		view = append(view, membership.Member{ID: w.id(j), Status: membership.StatusAlive, Meta: meta})
	}
	proposal, servers, ok := w.rule(w.id(i), view, w.expect)
	w.meta[i].Bootstrap = proposal
	if ok {
		w.boots[i] = servers
		w.meta[i].InCluster, w.meta[i].Bootstrap = true, ""
	}
}

// split reports two masters that bootstrapped different configurations.
func (w *bootstrapWorld) split() string {
	var first []raft.Server
	firstBy := -1
	for i := 0; i < w.n; i++ {
		s, ok := w.boots[i]
		if !ok {
			continue
		}
		if firstBy < 0 {
			first, firstBy = s, i
			continue
		}
		if !slices.Equal(first, s) {
			return fmt.Sprintf("%s bootstrapped %v, %s bootstrapped %v", w.id(firstBy), first, w.id(i), s)
		}
	}
	return ""
}

// run drives the world with random joins, gossip and decisions, and
// returns the first split.
func (w *bootstrapWorld) run(t *rapid.T) string {
	for step := rapid.IntRange(1, 200).Draw(t, "steps"); step > 0; step-- {
		i := rapid.IntRange(0, w.n-1).Draw(t, "i")
		j := rapid.IntRange(0, w.n-1).Draw(t, "j")
		switch rapid.IntRange(0, 2).Draw(t, "action") {
		case 0: // i learns of j, and of what j gossips now
			w.sees[i][j] = true
			w.heard[i][j] = w.meta[j]
		case 1: // j's latest metadata reaches i
			if w.sees[i][j] {
				w.heard[i][j] = w.meta[j]
			}
		case 2:
			w.decide(i)
		}
		if s := w.split(); s != "" {
			return s
		}
	}
	return ""
}

// TestBootstrapNeverSplitsUnderAnyGossipOrder: five masters started at
// once with an expect of three, whatever order they learn of each other
// and of each other's proposals in, never bootstrap two configurations.
func TestBootstrapNeverSplitsUnderAnyGossipOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		if s := newBootstrapWorld(5, 3, bootstrapDecision).run(t); s != "" {
			t.Fatal(s)
		}
	})
}

// TestBootstrapPropertyCatchesTheSeeAllRule: the same property finds the
// split of the rule that bootstraps with every master it sees.
func TestBootstrapPropertyCatchesTheSeeAllRule(t *testing.T) {
	found := false
	for try := 0; try < 5 && !found; try++ {
		rapid.Check(t, func(t *rapid.T) {
			if s := newBootstrapWorld(5, 3, seeAllRule).run(t); s != "" {
				found = true
			}
		})
	}
	if !found {
		t.Fatal("no split of the see-all rule found: the property cannot fail")
	}
}
