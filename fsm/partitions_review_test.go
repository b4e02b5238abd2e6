package fsm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// gen (2) feeds sum (2) and s2 (1), each its own region. gen/0's output is
// on e1, where sum/1 runs too; s2 runs on e4 and has read all of gen.
// Moving e1 off restarts sum (it ran there) and re-runs gen/0 for it; s2,
// which has read everything and has nothing on e1, goes on, as it does
// when sum/1 fails on its own.
func TestAMoveLeavesAConsumerThatReadEverythingRunning(t *testing.T) {
	setup := func() *harness {
		h := newHarness(t)
		h.submit("j", `{"vertices":[{"id":"gen","parallelism":2,"command":["x"]},
			{"id":"sum","parallelism":2,"command":["x"],"inputs":[{"from":"gen","mode":"blocking"}],"slot_sharing_group":"s"},
			{"id":"s2","parallelism":1,"command":["x"],"inputs":[{"from":"gen","mode":"blocking"}],"slot_sharing_group":"t"}],
			"restart":{"strategy":"fixed-delay","attempts":5,"delay":"1s"}}`)
		require.NoError(t, h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "j", Region: 0, Slots: []SlotAssign{
			{Group: "default", Index: 0, Executor: "e1", Slot: 0}, {Group: "default", Index: 1, Executor: "e2", Slot: 0}}}).Err)
		h.reportAll("e1", wire.StateFinished)
		h.reportAll("e2", wire.StateFinished)
		require.NoError(t, h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "j", Region: 1, Slots: []SlotAssign{
			{Group: "s", Index: 0, Executor: "e3", Slot: 0}, {Group: "s", Index: 1, Executor: "e1", Slot: 1}}}).Err)
		h.placeRegion("j", 2, "e4")
		h.reportAll("e1", wire.StateRunning)
		h.reportAll("e3", wire.StateRunning)
		h.reportAll("e4", wire.StateRunning)
		return h
	}
	// sum/1 fails on its own: gen/0 is not re-run at all (still tracked), s2 goes on.
	h := setup()
	h.report("e1", ReportUpdate{ID: "j/sum/1/0", State: wire.StateFailed})
	require.Equal(t, wire.StateRunning, h.exec("j/s2/0/0").State)

	// e1 moved off: gen/0 re-runs for sum; s2 should go on.
	h = setup()
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.NoError(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.Equal(t, wire.StateRunning, h.exec("j/s2/0/0").State, h.exec("j/s2/0/0").Message)
}

// p (2) -forward-> c (2) -> d (1); d also reads x, which runs, so d waits.
// c/0 finished (output on e3) and c/1 runs when c/0's output is lost: c/0
// runs again (one failure), once c/1 has ended. c/1 then finishes. When
// p/1's output is lost next, nobody will read it: c/1 finished and is
// kept, and c/0's re-run reads p/0 only: no failure, and c/1 keeps its
// output.
func TestALossNobodyWillReadCountsNoFailure(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"p","parallelism":2,"command":["x"]},
		{"id":"x","parallelism":1,"command":["x"],"slot_sharing_group":"g2"},
		{"id":"c","parallelism":2,"command":["x"],"inputs":[{"from":"p","mode":"blocking","distribution":"forward"}],"slot_sharing_group":"g3"},
		{"id":"d","parallelism":1,"command":["x"],"inputs":[{"from":"c","mode":"blocking"},{"from":"x","mode":"blocking"}],"slot_sharing_group":"g4"}],
		"restart":{"strategy":"fixed-delay","attempts":5,"delay":"1s"}}`)
	j := h.s.jobs["j"]
	rP, rX, rC := j.Vertices[0].Region, j.Vertices[1].Region, j.Vertices[2].Region
	require.NoError(t, h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "j", Region: rP, Slots: []SlotAssign{
		{Group: "default", Index: 0, Executor: "e1", Slot: 0}, {Group: "default", Index: 1, Executor: "e2", Slot: 0}}}).Err)
	h.placeRegion("j", rX, "e5")
	h.report("e5", ReportUpdate{ID: "j/x/0/0", State: wire.StateRunning})
	h.reportAll("e1", wire.StateFinished)
	h.reportAll("e2", wire.StateFinished)
	require.NoError(t, h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "j", Region: rC, Slots: []SlotAssign{
		{Group: "g3", Index: 0, Executor: "e3", Slot: 0}, {Group: "g3", Index: 1, Executor: "e4", Slot: 0}}}).Err)
	h.report("e3", ReportUpdate{ID: "j/c/0/0", State: wire.StateFinished, Bytes: 1})
	h.report("e4", ReportUpdate{ID: "j/c/1/0", State: wire.StateRunning})

	h.apply(&LosePartitions{Fenced: h.fenced(), Executor: "e3", IDs: []string{"j/c/0/0"}, Reason: "gone"})
	require.Equal(t, 1, j.Backoff.Failures)
	require.Equal(t, []Subtask{{Vertex: 2, Index: 0}}, j.Regions[rC].Rerun)
	h.report("e4", ReportUpdate{ID: "j/c/1/0", State: wire.StateFinished, Bytes: 1})
	checkInvariants(t, h.s)

	h.apply(&LosePartitions{Fenced: h.fenced(), Executor: "e2", IDs: []string{"j/p/1/0"}, Reason: "gone"})
	require.Equal(t, 1, j.Backoff.Failures, "p/1's output is read by nobody: c/1 finished and is kept")
	require.Equal(t, []Subtask{{Vertex: 2, Index: 0}}, j.Regions[rC].Rerun, "c/1 keeps its output")
}

// A loss's cause becomes the message of the job and of every execution
// its restart cancels (kept in Previous after the restart): naming every
// lost partition, gen -> sum at 1,000 by 1,000 with gen's executor lost
// gave a 9 KB message on 1,000 executions, and at 4,000 by 4,000 a
// snapshot of 312 MB where it had been 0.6 MB.
func TestALossCauseIsBounded(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"gen","parallelism":1000,"command":["x"]},
		{"id":"sum","parallelism":1000,"command":["x"],"slot_sharing_group":"s","inputs":[{"from":"gen","mode":"blocking"}]}]}`)
	h.placeRegion("j", 0, "e1")
	h.reportAll("e1", wire.StateFinished)
	h.placeRegion("j", 1, "e2")
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})
	require.Less(t, len(h.job("j").Message), 1024)
	require.Less(t, len(h.exec("j/sum/0/0").Message), 1024)
}

// g feeds s1, which runs, and s2, ready and not placed. s1 fails to fetch
// g's output (it was still DEPLOYING on its executor, though the state had
// it RUNNING): g runs again for s2, and s1's failure is part of that
// restart, one failure (with "attempts": 1, the job goes on).
func TestAFetchFailureWithAnotherReaderIsOneFailure(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"g","parallelism":1,"command":["x"]},
		{"id":"s1","parallelism":1,"command":["x"],"inputs":[{"from":"g","mode":"blocking"}],"slot_sharing_group":"a"},
		{"id":"s2","parallelism":1,"command":["x"],"inputs":[{"from":"g","mode":"blocking"}],"slot_sharing_group":"b"}],
		"restart":{"strategy":"fixed-delay","attempts":1,"delay":"1s"}}`)
	j := h.s.jobs["j"]
	h.placeRegion("j", j.Vertices[0].Region, "e1")
	h.reportAll("e1", wire.StateFinished)
	h.placeRegion("j", j.Vertices[1].Region, "e2")
	h.reportAll("e2", wire.StateRunning)
	require.Equal(t, RegionReady, j.Regions[j.Vertices[2].Region].Status)
	h.report("e2", ReportUpdate{ID: "j/s1/0/0", State: wire.StateFailed, Unavailable: []string{"j/g/0/0"}})
	checkInvariants(t, h.s)
	require.Equal(t, 1, j.Backoff.Failures, "one failing update, one failure")
	require.Equal(t, JobRestarting, h.job("j").Status, h.job("j").Message)
}
