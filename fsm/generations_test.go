package fsm

import (
	"bytes"
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

// A backup restored over a running cluster goes back in time; no
// execution id the running cluster used is used again after it: a job the
// backup does not know, submitted again under its id, starts above its
// attempts, and a job the backup holds restarts above the attempts it
// reached since the backup. What the backup's jobs run now is kept (its
// tasks are adopted).
func TestARestoredBackupUsesNoExecutionIDAgain(t *testing.T) {
	spec := `{"vertices":[{"id":"v","parallelism":2,"command":["true"]}],"restart":{"strategy":"fixed-delay","attempts":9,"delay":"0s"}}`
	h := newHarness(t)
	restart := func(job string) {
		for _, e := range h.s.Expected("e1") {
			if e.Job == job {
				h.report("e1", ReportUpdate{ID: e.ID, State: wire.StateFailed})
			}
		}
		h.apply(&RestartRegions{Fenced: h.fenced(), Job: job})
		h.placeAll("e1")
	}
	require.True(t, h.submit("kept", spec).Created)
	h.placeAll("e1")
	var backup bytes.Buffer
	_, err := h.s.Capture().WriteTo(&backup)
	require.NoError(t, err)
	adopted := h.s.Expected("e1")

	used := map[string]bool{}
	note := func() {
		for _, e := range h.s.Expected("e1") {
			used[e.ID] = true
		}
	}
	note()
	restart("kept")
	note()
	restart("kept")
	note()
	require.True(t, h.submit("gone", spec).Created, "a job the backup does not know")
	h.placeAll("e1")
	note()
	restart("gone")
	note()

	h.restoreOver(&backup)
	require.Equal(t, 2, h.s.FirstAttempt("gone"), "above its attempt 1")
	require.Equal(t, adopted, h.s.Expected("e1"), "the backup's running attempts stay, to be adopted")

	h.establish("m2")
	require.True(t, h.submit("gone", spec).Created)
	h.placeAll("e1")
	restart("kept")
	for _, e := range h.s.Expected("e1") {
		require.False(t, used[e.ID], "%s was used before the restore", e.ID)
	}
	require.Equal(t, 3, h.exec("kept/v/0/3").Attempt, "kept restarts above attempt 2")
	checkInvariants(t, h.s)
}

// A job of the backup whose downstream region had not been placed when the
// backup was taken, and was placed, ran and finished in the state the
// backup replaces: its SCHEDULED attempts move above those the replaced
// state used, so they are not deployed again under the same ids.
func TestARestoredJobsUnplacedAttemptsMoveAboveTheUsedOnes(t *testing.T) {
	spec := `{"vertices":[{"id":"a","parallelism":1,"command":["x"]},
		{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}]}],
		"restart":{"strategy":"fixed-delay","attempts":9,"delay":"0s"}}`
	h := newHarness(t)
	require.True(t, h.submit("kept", spec).Created)
	h.placeAll("e1")
	var backup bytes.Buffer
	_, err := h.s.Capture().WriteTo(&backup)
	require.NoError(t, err)

	used := map[string]bool{}
	h.report("e1", ReportUpdate{ID: "kept/a/0/0", State: wire.StateFinished, Bytes: 1})
	for _, e := range h.placeAll("e1") {
		used[e.ID] = true // kept/b/0/0 runs on e1 after the backup
	}
	require.True(t, used["kept/b/0/0"])
	h.report("e1", ReportUpdate{ID: "kept/b/0/0", State: wire.StateFinished})
	require.Equal(t, JobFinished, h.job("kept").Status)

	h.restoreOver(&backup)
	h.establish("m2")
	// The adopted kept/a/0/0 reports FINISHED (the executor still remembers it).
	h.report("e1", ReportUpdate{ID: "kept/a/0/0", State: wire.StateFinished, Bytes: 1})
	for _, e := range h.placeAll("e1") {
		require.False(t, used[e.ID], "%s deployed again after the restore; the replaced state used it", e.ID)
	}
}
