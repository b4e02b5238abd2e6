package fsm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// TestIDUsedAgainAfterItsTombstoneNeverReusesAnExecutionID: every job
// under one id, with its tombstone kept or pruned in between, runs under
// execution ids no earlier job of the id had.
func TestIDUsedAgainAfterItsTombstoneNeverReusesAnExecutionID(t *testing.T) {
	h := newHarness(t)
	spec := `{"vertices":[{"id":"v","parallelism":2,"command":["true"]}],"restart":{"strategy":"fixed-delay","attempts":5,"delay":"0s"}}`
	seen := map[string]int{}
	for gen := 0; gen < 6; gen++ {
		require.True(t, h.submit("again", spec).Created, "generation %d", gen)
		h.placeAll("e1")
		if gen%2 == 1 {
			// A restart in between: the next generation starts above it.
			first := h.s.Expected("e1")[0].ID
			h.report("e1", ReportUpdate{ID: first, State: wire.StateFailed})
			h.reportAll("e1", wire.StateCanceled)
			h.apply(&RestartRegions{Fenced: h.fenced(), Job: "again"})
			h.placeAll("e1")
		}
		for _, e := range h.s.Expected("e1") {
			prev, dup := seen[e.ID]
			require.False(t, dup, "generation %d runs %s, as generation %d did", gen, e.ID, prev)
			seen[e.ID] = gen
		}
		h.reportAll("e1", wire.StateFinished)
		h.now += 1000
		h.apply(&ForgetJobs{Fenced: h.fenced(), IDs: []string{"again"}})
		if gen%3 != 0 {
			h.now += 1000
			h.apply(&ForgetJobs{Fenced: h.fenced(), PruneBefore: h.now})
			_, kept := h.s.Tombstone("again")
			require.False(t, kept, "the tombstone is pruned")
		}
		checkInvariants(t, h.s)
	}
	require.Len(t, seen, 2*6)
}

func TestFloorsStayBoundedAndFreshIDsStartAtZero(t *testing.T) {
	h := newHarness(t)
	require.Equal(t, 0, h.s.FirstAttempt("fresh"))
	for i := 0; i < 3*floorBuckets; i++ {
		h.s.forgotten[string(rune('a'+i%26))+string(rune(i))] = Tombstone{Next: 1 + i%7}
	}
	h.apply(&ForgetJobs{Fenced: h.fenced(), PruneBefore: h.now + 1})
	require.LessOrEqual(t, len(h.s.floors), floorBuckets)
	require.Empty(t, h.s.forgotten)
}
