package fsm

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"jobmaster/wire"
)

// lossSpecs are jobs whose data edges make losses and re-runs interesting:
// chains, forward chains, fan-out and fan-in, a pipelined producer region,
// full failover.
var lossSpecs = []string{
	`{"vertices":[{"id":"a","parallelism":2,"command":["x"]},{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}]},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}]}],"restart":{"strategy":"fixed-delay","attempts":50,"delay":"1s"}}`,
	`{"vertices":[{"id":"a","parallelism":2,"command":["x"]},{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a","mode":"blocking","distribution":"forward"}]},
		{"id":"c","parallelism":2,"command":["x"],"inputs":[{"from":"b","mode":"blocking","distribution":"forward"}]},
		{"id":"d","parallelism":1,"command":["x"],"inputs":[{"from":"c","mode":"blocking"}]}],"restart":{"strategy":"fixed-delay","attempts":50,"delay":"1s"}}`,
	`{"vertices":[{"id":"a","parallelism":2,"command":["x"]},{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a"}]},
		{"id":"c","parallelism":2,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}],"slot_sharing_group":"g"},
		{"id":"d","parallelism":2,"command":["x"],"inputs":[{"from":"c","mode":"blocking","distribution":"forward"}],"slot_sharing_group":"h"}],"restart":{"strategy":"fixed-delay","attempts":50,"delay":"2s"}}`,
	`{"vertices":[{"id":"a","parallelism":2,"command":["x"]},{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}],"slot_sharing_group":"g"},
		{"id":"c","parallelism":2,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}],"slot_sharing_group":"h"},
		{"id":"d","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"},{"from":"c","mode":"blocking"}],"slot_sharing_group":"i"}],"restart":{"strategy":"exponential-delay","initial_delay":"1s","max_delay":"4s","attempts":50}}`,
	`{"vertices":[{"id":"a","parallelism":2,"command":["x"]},{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}]},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}]}],"failover":"full","restart":{"strategy":"fixed-delay","attempts":50,"delay":"1s"}}`,
	`{"vertices":[{"id":"g","parallelism":2,"command":["x"]},{"id":"s1","parallelism":1,"command":["x"],"inputs":[{"from":"g","mode":"blocking"}],"slot_sharing_group":"g1"},
		{"id":"s2","parallelism":2,"command":["x"],"inputs":[{"from":"g","mode":"blocking"}],"slot_sharing_group":"g2"},
		{"id":"t","parallelism":1,"command":["x"],"inputs":[{"from":"s2","mode":"blocking"}],"slot_sharing_group":"g3"}],"restart":{"strategy":"fixed-delay","attempts":50,"delay":"500ms"}}`,
	`{"vertices":[{"id":"p","parallelism":1,"command":["x"]},{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"p","mode":"blocking"}]}],
		"restart":{"strategy":"fixed-delay","attempts":1,"delay":"0s"}}`,
	`{"vertices":[{"id":"a","parallelism":2,"command":["x"]},{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a","mode":"blocking","distribution":"forward"}],"slot_sharing_group":"g"},
		{"id":"c","parallelism":2,"command":["x"],"inputs":[{"from":"a","mode":"blocking"},{"from":"b","mode":"blocking","distribution":"forward"}],"slot_sharing_group":"h"},
		{"id":"d","parallelism":1,"command":["x"],"inputs":[{"from":"c","mode":"pipelined"},{"from":"a","mode":"blocking"}],"slot_sharing_group":"h"}],"restart":{"strategy":"fixed-delay","attempts":50,"delay":"1s"}}`,
	`{"vertices":[{"id":"a","parallelism":2,"command":["x"]},{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}]},
		{"id":"c","parallelism":2,"command":["x"],"inputs":[{"from":"b","mode":"blocking","distribution":"forward"}]},
		{"id":"d","parallelism":2,"command":["x"],"inputs":[{"from":"c","mode":"blocking"}]}],"failover":"full","restart":{"strategy":"failure-rate","max_failures":50,"interval":"10s","delay":"0s"}}`,
}

// drive runs every job to its end: every live execution on every executor
// finishes (or confirms its cancel), ready regions are placed on e9,
// restarts are applied after a long delay. Nothing fails, so no job may
// count a failure, and every job must end.
func drive(t *rapid.T, s *State, token uint64, now *int64) {
	apply := func(c Command) {
		for _, r := range s.ApplyEntry(s.Index()+1, MustEncode(c)) {
			require.NoError(t, r.Err, "%T", c)
		}
		checkInvariants(t, s)
	}
	f := func() Fenced { return Fenced{Token: token, Time: *now} }
	for _, ex := range []string{"e1", "e2", "e3"} {
		if s.Draining(ex) {
			apply(&UndrainExecutor{Fenced: f(), Executor: ex})
		}
	}
	failures := map[string]int{}
	for id, j := range s.jobs {
		failures[id] = j.Backoff.Failures
	}
	// Rounds of: every live execution ends as asked (FINISHED, or CANCELED
	// for a cancel), ready regions are placed, restarts come due.
	for round := 0; round < 100; round++ {
		var exs []string
		for ex := range s.byExecutor {
			exs = append(exs, ex)
		}
		sort.Strings(exs)
		for _, ex := range exs {
			var ups []ReportUpdate
			for _, e := range s.Expected(ex) {
				st := wire.StateFinished
				if e.State == wire.StateCanceling {
					st = wire.StateCanceled
				}
				ups = append(ups, ReportUpdate{ID: e.ID, State: st, Bytes: 1})
			}
			if len(ups) > 0 {
				apply(&ReportExecutions{Fenced: f(), Executor: ex, Updates: ups})
			}
		}
		for k := 0; k < 50 && len(s.ReadyRegions()) > 0; k++ {
			apply(placeOn(s, s.ReadyRegions()[0], "e9", f(), nil))
		}
		*now += 100_000
		for _, id := range sortedKeys(s.jobs) {
			apply(&RestartRegions{Fenced: f(), Job: id})
		}
	}
	for id, j := range s.jobs {
		require.True(t, j.Status.Terminal(), "job %s is %s after driving it: regions %+v", id, j.Status, j.Regions)
		if j.Status == JobFinished {
			require.Equal(t, failures[id], j.Backoff.Failures, "job %s counted failures while nothing failed", id)
		}
	}
}

// TestPropertyLossesAndRestartsEnd: with jobs whose data edges make
// losses and re-runs interesting, consumers failing to fetch their inputs
// and fenced cancels beside the usual commands, the invariants hold after
// every entry (no task may start reading a partition nobody holds), a
// command counts at most one failure per failing update (an executor lost
// one per job, a move none), and then, with nothing failing any more,
// every job ends without counting a failure: nothing waits forever.
func TestPropertyLossesAndRestartsEnd(t *testing.T) {
	saved := propertySpecs
	propertySpecs = append(append([]string{}, lossSpecs...), saved...)
	defer func() { propertySpecs = saved }()
	rapid.Check(t, func(t *rapid.T) {
		s := NewState()
		var token uint64
		now := int64(1_000_000)
		steps := rapid.IntRange(1, 150).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			c := genCommand(t, s, &token, &now)
			if rapid.IntRange(0, 5).Draw(t, "special") == 0 {
				c = genSpecial(t, s, token, now, c)
			}
			before := map[string]int{}
			for id, j := range s.jobs {
				before[id] = j.Backoff.Failures
			}
			for _, r := range s.ApplyEntry(s.Index()+1, MustEncode(c)) {
				if r.Epoch != 0 {
					token = r.Epoch
				}
			}
			checkInvariants(t, s)
			limit := 1
			switch c := c.(type) {
			case *ReportExecutions:
				limit = len(c.Updates)
			case *FailExecutions:
				limit = len(c.IDs)
			case *ExecutorLost:
				limit = 1
			case *MoveExecutor:
				limit = 0
			}
			for id, j := range s.jobs {
				if b, ok := before[id]; ok && j.Spec.Restart.Strategy == "fixed-delay" {
					require.LessOrEqual(t, j.Backoff.Failures-b, limit, "job %s: %T counted %d failures", id, c, j.Backoff.Failures-b)
				}
			}
		}
		if token == 0 {
			return
		}
		drive(t, s, token, &now)
	})
}

// genSpecial: a consumer failing to fetch one of its inputs' current
// attempts (tracked or released), or a fenced cancel.
func genSpecial(t *rapid.T, s *State, token uint64, now int64, dflt Command) Command {
	f := Fenced{Token: token, Time: now}
	ex := rapid.SampledFrom(propertyExecutors).Draw(t, "sexecutor")
	live := s.Expected(ex)
	if len(live) == 0 {
		return dflt
	}
	e := rapid.SampledFrom(live).Draw(t, "sexec")
	if rapid.Bool().Draw(t, "fenced") {
		return &ReportExecutions{Fenced: f, Executor: ex, Updates: []ReportUpdate{{ID: e.ID, State: wire.StateCanceled, Fenced: true}}}
	}
	j := s.jobs[e.Job]
	var ids []string
	for _, in := range j.Spec.Vertices[e.VertexIndex].Inputs {
		pv := j.Spec.VertexIndex(in.From)
		for _, pe := range s.current[j.ID][pv] {
			if pe != nil {
				ids = append(ids, pe.ID)
			}
		}
	}
	if len(ids) == 0 {
		return dflt
	}
	return &ReportExecutions{Fenced: f, Executor: ex, Updates: []ReportUpdate{{ID: e.ID, State: wire.StateFailed,
		Unavailable: []string{rapid.SampledFrom(ids).Draw(t, "sid")}}}}
}
