package fsm

import (
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// genSum: gen (2 subtasks) feeds sum (1) through a blocking all-to-all
// edge; each is its own region.
const genSum = `{"vertices":[{"id":"gen","parallelism":2,"command":["x"]},
	{"id":"sum","parallelism":1,"command":["x"],"inputs":[{"from":"gen","mode":"blocking"}]}],
	"restart":{"strategy":"fixed-delay","attempts":2,"delay":"1s"}}`

// finishGen runs gen to FINISHED, gen/0 on e1 and gen/1 on e2.
func finishGen(t *testing.T, h *harness) {
	t.Helper()
	h.submit("j", genSum)
	rr := h.s.ReadyRegions()
	require.Len(t, rr, 1)
	r := h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "j", Region: 0, Slots: []SlotAssign{
		{Group: "default", Index: 0, Executor: "e1", Slot: 0}, {Group: "default", Index: 1, Executor: "e2", Slot: 0}}})
	require.NoError(t, r.Err)
	h.report("e1", ReportUpdate{ID: "j/gen/0/0", State: wire.StateFinished, Bytes: 10})
	h.report("e2", ReportUpdate{ID: "j/gen/1/0", State: wire.StateFinished, Bytes: 20})
	checkInvariants(t, h.s)
}

// execIDs lists the ids of executions, sorted.
func execIDs(es []Execution) []string {
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	sort.Strings(ids)
	return ids
}

func partitionIDs(s *State) []string {
	var ids []string
	for _, p := range s.Partitions() {
		ids = append(ids, p.ID+"@"+p.Executor)
	}
	return ids
}

func TestPartitionTrackedUntilConsumersFinish(t *testing.T) {
	h := newHarness(t)
	finishGen(t, h)
	require.Equal(t, []string{"j/gen/0/0@e1", "j/gen/1/0@e2"}, partitionIDs(h.s))
	require.Equal(t, int64(20), h.s.PartitionsOn("e2")[0].Bytes)
	require.Equal(t, map[string]int{"e1": 1, "e2": 1}, h.s.PartitionsHeld())

	// sum is deployed with both sources and reads them.
	placed := h.placeAll("e3")
	require.Len(t, placed, 1)
	specs := h.s.TaskSpecs(placed)
	require.Len(t, specs[0].Inputs, 1)
	in := specs[0].Inputs[0]
	require.Equal(t, wire.ModeBlocking, in.Mode)
	require.Equal(t, []wire.Source{{Subtask: 0, Execution: "j/gen/0/0", Executor: "e1"}, {Subtask: 1, Execution: "j/gen/1/0", Executor: "e2"}}, in.Sources)
	gen := h.s.TaskSpecs([]Execution{h.exec("j/gen/0/0")})[0]
	require.Equal(t, []wire.Output{{Vertex: "sum", Parallelism: 1, Mode: wire.ModeBlocking}}, gen.Outputs)

	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateRunning})
	require.Len(t, h.s.Partitions(), 2, "still read")
	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateFinished})
	require.Equal(t, JobFinished, h.job("j").Status)
	require.Empty(t, h.s.Partitions(), "released once the consumer region finished")
	require.Empty(t, h.s.PartitionsHeld())
	checkInvariants(t, h.s)
}

func TestPartitionsReleasedWhenJobStops(t *testing.T) {
	h := newHarness(t)
	finishGen(t, h)
	h.apply(&CancelJob{Fenced: h.fenced(), ID: "j"})
	require.Empty(t, h.s.Partitions())
	checkInvariants(t, h.s)
}

// TestPartitionLostWithExecutor: the executor holding gen/0's partition is
// lost while sum is deployed but has not started (it fetches its inputs
// first): one restart; gen/0 alone runs again (gen/1's partition is still
// there), sum restarts and then reads the new attempt.
func TestPartitionLostWithExecutor(t *testing.T) {
	h := newHarness(t)
	finishGen(t, h)
	h.placeAll("e3")
	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateDeploying})

	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})
	j := h.job("j")
	require.Equal(t, JobRestarting, j.Status)
	require.Equal(t, "partition of gen/0 lost with executor e1", j.Message)
	require.Equal(t, 1, h.s.jobs["j"].Backoff.Failures, "one restart")
	require.Equal(t, []string{"j/gen/1/0@e2"}, partitionIDs(h.s))
	require.Equal(t, map[string]int{"e2": 1}, h.s.PartitionsHeld())
	require.Equal(t, wire.StateCanceling, h.exec("j/sum/0/0").State, "the consumer is stopped")
	checkInvariants(t, h.s)

	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateCanceled})
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	require.Equal(t, wire.StateScheduled, h.exec("j/gen/0/1").State, "gen/0 runs again")
	require.Equal(t, wire.StateFinished, h.exec("j/gen/1/0").State, "gen/1 does not")
	require.Equal(t, wire.StateScheduled, h.exec("j/sum/0/1").State)
	rr := h.s.ReadyRegions()
	require.Len(t, rr, 1, "gen is ready; sum waits for it")
	require.Equal(t, 1, rr[0].Executions)
	require.Equal(t, []SlotNeed{{Group: "default", Index: 0}}, rr[0].Keys)
	checkInvariants(t, h.s)

	h.placeAll("e2")
	h.report("e2", ReportUpdate{ID: "j/gen/0/1", State: wire.StateFinished, Bytes: 11})
	placed := h.placeAll("e3")
	require.Len(t, placed, 1)
	in := h.s.TaskSpecs(placed)[0].Inputs[0]
	require.Equal(t, []wire.Source{{Subtask: 0, Execution: "j/gen/0/1", Executor: "e2"}, {Subtask: 1, Execution: "j/gen/1/0", Executor: "e2"}}, in.Sources,
		"sum reads the attempt the state names")
	h.report("e3", ReportUpdate{ID: "j/sum/0/1", State: wire.StateFinished})
	require.Equal(t, JobFinished, h.job("j").Status)
	require.Contains(t, h.job("j").Message, "lost", "a finished job keeps what it last restarted for")
	require.Empty(t, h.s.Partitions())
	checkInvariants(t, h.s)
}

// TestAPartitionLostAfterItWasReadRestartsNothing: sum runs, so it has
// fetched gen's output whole, when the executor holding gen/0's partition
// is lost: nothing restarts, the partition is no longer tracked, and sum
// finishes on what it read.
func TestAPartitionLostAfterItWasReadRestartsNothing(t *testing.T) {
	h := newHarness(t)
	finishGen(t, h)
	h.placeAll("e3")
	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateRunning})

	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})
	j := h.job("j")
	require.Equal(t, JobRunning, j.Status)
	require.Empty(t, j.Message)
	require.Zero(t, h.s.jobs["j"].Backoff.Failures)
	require.Equal(t, wire.StateRunning, h.exec("j/sum/0/0").State, "sum goes on")
	require.Equal(t, []string{"j/gen/1/0@e2"}, partitionIDs(h.s), "gen/0's is no longer tracked")
	checkInvariants(t, h.s)

	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateFinished})
	require.Equal(t, JobFinished, h.job("j").Status)
	require.Zero(t, h.job("j").Restarts)
	require.Empty(t, h.s.Partitions())
	checkInvariants(t, h.s)
}

// TestAReadInputLostIsProducedAgainWhenItsConsumerRestarts: as above, and
// then sum fails: its restart has gen/0 run again first (its output is
// gone), in the same restart, one failure for the strategy, and sum reads
// the new attempt.
func TestAReadInputLostIsProducedAgainWhenItsConsumerRestarts(t *testing.T) {
	h := newHarness(t)
	finishGen(t, h)
	h.placeAll("e3")
	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateRunning})
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})

	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateFailed, Message: "exit status 1"})
	require.Equal(t, JobRestarting, h.job("j").Status)
	require.Equal(t, 1, h.s.jobs["j"].Backoff.Failures)
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	checkInvariants(t, h.s)
	placed := h.placeAll("e2")
	require.Equal(t, []string{"j/gen/0/1"}, execIDs(placed), "gen/0 runs again, gen/1 does not")
	h.report("e2", ReportUpdate{ID: "j/gen/0/1", State: wire.StateFinished, Bytes: 11})
	placed = h.placeAll("e3")
	require.Equal(t, []string{"j/sum/0/1"}, execIDs(placed))
	require.Equal(t, []wire.Source{{Subtask: 0, Execution: "j/gen/0/1", Executor: "e2"}, {Subtask: 1, Execution: "j/gen/1/0", Executor: "e2"}},
		h.s.TaskSpecs(placed)[0].Inputs[0].Sources)
	h.report("e3", ReportUpdate{ID: "j/sum/0/1", State: wire.StateFinished})
	require.Equal(t, JobFinished, h.job("j").Status)
	require.Equal(t, 1, h.s.jobs["j"].Backoff.Failures)
	checkInvariants(t, h.s)
}

// The same through a drain: gen/0's partition moved off a draining
// executor while sum, which read it, runs is dropped and produced again
// only if sum restarts; sum restarting for the drain (it ran there too)
// has it produced again, uncounted.
func TestAMoveDropsAReadInputAndItsConsumersRestartProducesIt(t *testing.T) {
	h := newHarness(t)
	finishGen(t, h)
	h.placeAll("e3")
	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateRunning})
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.NoError(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.Equal(t, JobRunning, h.job("j").Status)
	require.Equal(t, wire.StateRunning, h.exec("j/sum/0/0").State)
	require.Equal(t, []string{"j/gen/1/0@e2"}, partitionIDs(h.s))
	checkInvariants(t, h.s)

	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e3"}).Err)
	require.NoError(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e3"}).Err)
	require.Equal(t, JobRestarting, h.job("j").Status)
	require.Zero(t, h.s.jobs["j"].Backoff.Failures, "a move is not counted")
	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateCanceled})
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	checkInvariants(t, h.s)
	require.Equal(t, []string{"j/gen/0/1"}, execIDs(h.placeAll("e2")))
}

// TestPartitionUnavailableToConsumer: a consumer that cannot fetch a
// partition fails, and that failure and the re-run are one restart.
func TestPartitionUnavailableToConsumer(t *testing.T) {
	h := newHarness(t)
	finishGen(t, h)
	h.placeAll("e3")
	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateFailed, Message: "input gen/1 unavailable: connection refused",
		Unavailable: []string{"j/gen/1/0"}})
	j := h.job("j")
	require.Equal(t, JobRestarting, j.Status)
	require.Equal(t, "partition of gen/1 unavailable to j/sum/0/0: input gen/1 unavailable: connection refused", j.Message)
	require.Equal(t, 1, h.s.jobs["j"].Backoff.Failures)
	require.Equal(t, []string{"j/gen/0/0@e1"}, partitionIDs(h.s))
	checkInvariants(t, h.s)
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	require.Equal(t, wire.StateScheduled, h.exec("j/gen/1/1").State)
	require.Equal(t, wire.StateFinished, h.exec("j/gen/0/0").State)
	checkInvariants(t, h.s)
}

// TestPartitionLostReportedGone: a partition the report no longer shows,
// and the restart strategy exhausted: the job fails with the reason.
func TestPartitionLostReportedGone(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"gen","parallelism":1,"command":["x"]},
		{"id":"sum","parallelism":1,"command":["x"],"inputs":[{"from":"gen","mode":"blocking"}]}],"restart":{"strategy":"none"}}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "j/gen/0/0", State: wire.StateFinished})
	h.apply(&LosePartitions{Fenced: h.fenced(), Executor: "e2", IDs: []string{"j/gen/0/0"}, Reason: "wrong executor"})
	require.Len(t, h.s.Partitions(), 1, "a loss on another executor changes nothing")
	h.apply(&LosePartitions{Fenced: h.fenced(), Executor: "e1", IDs: []string{"j/gen/0/0"}, Reason: "no longer held by executor e1"})
	j := h.job("j")
	require.Equal(t, JobFailed, j.Status, "nothing was running: FAILING ends at once")
	require.Equal(t, "partition of gen/0 no longer held by executor e1; restart strategy none", j.Message)
	require.Empty(t, h.s.Partitions())
	checkInvariants(t, h.s)
}

// TestPartitionLostAfterConsumersFinished: nobody needs it: no re-run.
func TestPartitionLostAfterConsumersFinished(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"gen","parallelism":1,"command":["x"]},
		{"id":"a","parallelism":1,"command":["x"],"inputs":[{"from":"gen","mode":"blocking"}]},
		{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}]}]}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "j/gen/0/0", State: wire.StateFinished})
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "j/a/0/0", State: wire.StateFinished})
	require.Equal(t, []string{"j/a/0/0@e1"}, partitionIDs(h.s), "gen's released once a finished")
	h.placeAll("e2")
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e2"})
	// b failed with e2 (a region failover of b alone), and a's partition,
	// on e1, is untouched.
	require.Equal(t, JobRestarting, h.job("j").Status)
	require.Equal(t, []string{"j/a/0/0@e1"}, partitionIDs(h.s))
	checkInvariants(t, h.s)
}

// TestPartitionForwardReleasedWithRegion: a forward consumer that finished
// does not release its input while its region may still restart.
func TestPartitionForwardReleasedWithRegion(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"gen","parallelism":2,"command":["x"]},
		{"id":"f","parallelism":2,"command":["x"],"inputs":[{"from":"gen","mode":"blocking","distribution":"forward"}]}]}`)
	h.placeAll("e1")
	h.reportAll("e1", wire.StateFinished)
	placed := h.placeAll("e1")
	in := h.s.TaskSpecs(placed)[0].Inputs[0]
	require.True(t, in.Forward)
	h.report("e1", ReportUpdate{ID: "j/f/0/0", State: wire.StateFinished})
	require.Len(t, h.s.Partitions(), 2, "f/1 has not finished: its region may restart f/0 too")
	h.report("e1", ReportUpdate{ID: "j/f/1/0", State: wire.StateFinished})
	require.Empty(t, h.s.Partitions())
	checkInvariants(t, h.s)
}

// TestPartitionLostInMultiVertexRegion: a producer region of several
// vertices re-runs whole.
func TestPartitionLostInMultiVertexRegion(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"a","parallelism":2,"command":["x"]},
		{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a"}]},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}]}]}`)
	h.placeAll("e1")
	h.reportAll("e1", wire.StateFinished)
	require.Empty(t, func() []string {
		var ids []string
		for _, p := range h.s.Partitions() {
			if p.VertexIndex == 0 {
				ids = append(ids, p.ID)
			}
		}
		return ids
	}(), "a's pipelined partitions are released when their region finished")
	require.Len(t, h.s.Partitions(), 2)
	h.apply(&LosePartitions{Fenced: h.fenced(), Executor: "e1", IDs: []string{"j/b/1/0"}, Reason: "gone"})
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	for _, id := range []string{"j/a/0/1", "j/a/1/1", "j/b/0/1", "j/b/1/1"} {
		require.Equal(t, wire.StateScheduled, h.exec(id).State, id)
	}
	require.Empty(t, h.s.Partitions(), "the old attempts' partitions are superseded")
	checkInvariants(t, h.s)
}

// startGen places gen, gen/0 on e1 and gen/1 on e2, and finishes gen/0
// only: gen/1 still runs.
func startGen(t *testing.T, h *harness) {
	t.Helper()
	h.submit("j", genSum)
	r := h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "j", Region: 0, Slots: []SlotAssign{
		{Group: "default", Index: 0, Executor: "e1", Slot: 0}, {Group: "default", Index: 1, Executor: "e2", Slot: 0}}})
	require.NoError(t, r.Err)
	h.report("e1", ReportUpdate{ID: "j/gen/0/0", State: wire.StateFinished, Bytes: 10})
	h.report("e2", ReportUpdate{ID: "j/gen/1/0", State: wire.StateRunning})
	checkInvariants(t, h.s)
}

// TestPartitionLostWhileSiblingsRun: gen/0's partition is lost while gen/1
// still runs. gen/1 is not stopped; once it has finished, gen/0 alone runs
// again, and sum reads both.
func TestPartitionLostWhileSiblingsRun(t *testing.T) {
	h := newHarness(t)
	startGen(t, h)
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})
	require.Equal(t, JobRestarting, h.job("j").Status)
	require.Equal(t, 1, h.s.jobs["j"].Backoff.Failures, "one restart")
	require.Equal(t, wire.StateRunning, h.exec("j/gen/1/0").State, "the healthy sibling goes on")
	checkInvariants(t, h.s)

	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	_, ok := h.s.Execution("j/gen/0/1")
	require.False(t, ok, "the re-run waits for gen/1 to end")

	h.report("e2", ReportUpdate{ID: "j/gen/1/0", State: wire.StateFinished, Bytes: 20})
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	require.Equal(t, wire.StateScheduled, h.exec("j/gen/0/1").State, "gen/0 runs again")
	require.Equal(t, wire.StateFinished, h.exec("j/gen/1/0").State, "gen/1 keeps its attempt")
	checkInvariants(t, h.s)

	h.placeAll("e2")
	h.report("e2", ReportUpdate{ID: "j/gen/0/1", State: wire.StateFinished, Bytes: 11})
	placed := h.placeAll("e3")
	require.Len(t, placed, 1)
	require.Equal(t, []wire.Source{{Subtask: 0, Execution: "j/gen/0/1", Executor: "e2"}, {Subtask: 1, Execution: "j/gen/1/0", Executor: "e2"}},
		h.s.TaskSpecs(placed)[0].Inputs[0].Sources)
	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateFinished})
	require.Equal(t, JobFinished, h.job("j").Status)
	checkInvariants(t, h.s)
}

// TestPartitionLostThenSiblingFails: the sibling that went on fails before
// the re-run: the re-run covers it too.
func TestPartitionLostThenSiblingFails(t *testing.T) {
	h := newHarness(t)
	startGen(t, h)
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})
	h.report("e2", ReportUpdate{ID: "j/gen/1/0", State: wire.StateFailed, Message: "exit status 1"})
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	require.Equal(t, wire.StateScheduled, h.exec("j/gen/0/1").State)
	require.Equal(t, wire.StateScheduled, h.exec("j/gen/1/1").State, "the failed sibling runs again too")
	checkInvariants(t, h.s)
	h.placeAll("e2")
	h.reportAll("e2", wire.StateFinished)
	h.placeAll("e3")
	h.reportAll("e3", wire.StateFinished)
	require.Equal(t, JobFinished, h.job("j").Status)
}

// TestLostMiddleStageReRunsFromAReleasedInput: a -> b -> c, blocking. When
// b finished, a's partition was released; c ran when the executor holding
// b's partitions was lost, so b runs again, reading a's output, which no
// executor holds any more: a runs again too, in the same restart, and b
// waits for it (rather than finding a's output missing when it fetches,
// after the executor's --fetch-timeout, and restarting again).
func TestLostMiddleStageReRunsFromAReleasedInput(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"a","parallelism":2,"command":["x"]},
		{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}]},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}]}],
		"restart":{"strategy":"fixed-delay","attempts":5,"delay":"1s"}}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "j/a/0/0", State: wire.StateFinished, Bytes: 1}, ReportUpdate{ID: "j/a/1/0", State: wire.StateFinished, Bytes: 1})
	h.placeAll("e2")
	h.report("e2", ReportUpdate{ID: "j/b/0/0", State: wire.StateFinished, Bytes: 1}, ReportUpdate{ID: "j/b/1/0", State: wire.StateFinished, Bytes: 1})
	require.Equal(t, []string{"j/b/0/0@e2", "j/b/1/0@e2"}, partitionIDs(h.s), "a's partitions are released once b finished")
	h.placeAll("e3") // c fetches b's output

	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e2"})
	require.Equal(t, wire.StateCanceling, h.exec("j/c/0/0").State)
	h.report("e3", ReportUpdate{ID: "j/c/0/0", State: wire.StateCanceled})
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	placed := h.placeAll("e3")
	require.Equal(t, []string{"j/a/0/1", "j/a/1/1"}, execIDs(placed), "a runs again, for b: its outputs were released")
	h.report("e3", ReportUpdate{ID: "j/a/0/1", State: wire.StateFinished, Bytes: 1}, ReportUpdate{ID: "j/a/1/1", State: wire.StateFinished, Bytes: 1})
	placed = h.placeAll("e3")
	require.Equal(t, []string{"j/b/0/1", "j/b/1/1"}, execIDs(placed), "then b")
	var sources []string
	for _, src := range h.s.TaskSpecs(placed)[0].Inputs[0].Sources {
		sources = append(sources, src.Execution)
	}
	require.Equal(t, []string{"j/a/0/1", "j/a/1/1"}, sources, "reading a's new attempts")
	require.Equal(t, 1, h.s.jobs["j"].Backoff.Failures, "one failure for the restart strategy")
	checkInvariants(t, h.s)
}

// The same with c running, so it has read b's output: nothing restarts
// when b's partitions are lost; when c then fails, b runs again and so does
// a, in that one restart.
func TestAFailedConsumerReRunsLostAndReleasedInputs(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"a","parallelism":2,"command":["x"]},
		{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}]},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}]}],
		"restart":{"strategy":"fixed-delay","attempts":5,"delay":"1s"}}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "j/a/0/0", State: wire.StateFinished, Bytes: 1}, ReportUpdate{ID: "j/a/1/0", State: wire.StateFinished, Bytes: 1})
	h.placeAll("e2")
	h.report("e2", ReportUpdate{ID: "j/b/0/0", State: wire.StateFinished, Bytes: 1}, ReportUpdate{ID: "j/b/1/0", State: wire.StateFinished, Bytes: 1})
	h.placeAll("e3")
	h.report("e3", ReportUpdate{ID: "j/c/0/0", State: wire.StateRunning})
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e2"})
	require.Equal(t, wire.StateRunning, h.exec("j/c/0/0").State)
	require.Empty(t, h.s.Partitions())
	checkInvariants(t, h.s)

	h.report("e3", ReportUpdate{ID: "j/c/0/0", State: wire.StateFailed, Message: "exit status 2"})
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	checkInvariants(t, h.s)
	require.Equal(t, []string{"j/a/0/1", "j/a/1/1"}, execIDs(h.placeAll("e3")), "a first")
	h.reportAll("e3", wire.StateFinished)
	require.Equal(t, []string{"j/b/0/1", "j/b/1/1"}, execIDs(h.placeAll("e3")), "then b")
	h.reportAll("e3", wire.StateFinished)
	require.Equal(t, []string{"j/c/0/1"}, execIDs(h.placeAll("e3")), "then c")
	h.reportAll("e3", wire.StateFinished)
	require.Equal(t, JobFinished, h.job("j").Status)
	require.Equal(t, 1, h.s.jobs["j"].Backoff.Failures)
	checkInvariants(t, h.s)
}

// a (2) -forward-> b (2) -> c (1), all blocking; a ran on e1, b runs on
// e2. e1 is lost: b has read a's output, nothing restarts. b/0 finishes,
// then e2 is lost: b/0's output, which c has yet to read, runs again, and
// so does b/1, which failed with e2 (a re-run runs what has not finished);
// each reads its own a subtask, whose output is gone: both run again
// first, in the same restart.
func TestARerunCoversTheInputsOfSubtasksItRunsBesides(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"a","parallelism":2,"command":["x"]},
		{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a","mode":"blocking","distribution":"forward"}]},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}]}],
		"restart":{"strategy":"fixed-delay","attempts":5,"delay":"1s"}}`)
	h.placeAll("e1")
	h.reportAll("e1", wire.StateFinished)
	h.placeAll("e2")
	h.reportAll("e2", wire.StateRunning)
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})
	require.Equal(t, JobRunning, h.job("j").Status, "b has read a's output")
	h.report("e2", ReportUpdate{ID: "j/b/0/0", State: wire.StateFinished, Bytes: 1})
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e2"})
	checkInvariants(t, h.s)
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	checkInvariants(t, h.s)
	require.Equal(t, []string{"j/a/0/1", "j/a/1/1"}, execIDs(h.placeAll("e3")), "a/0 for b/0, a/1 for b/1")
	h.reportAll("e3", wire.StateFinished)
	placed := h.placeAll("e4")
	require.Equal(t, []string{"j/b/0/1", "j/b/1/1"}, execIDs(placed))
	for _, sp := range h.s.TaskSpecs(placed) {
		require.Equal(t, "e3", sp.Inputs[0].Sources[sp.Execution.Subtask].Executor, "%s reads a's new output", sp.Execution.ID)
	}
	require.Equal(t, 1, h.s.jobs["j"].Backoff.Failures)
	checkInvariants(t, h.s)
}

// One executor lost is one failure for the job: e1 holds y's output,
// which d has yet to read, and runs c, which read b's output, held on e1
// too or on e3. c restarts with the re-run of y (and of b, if it went),
// as part of that one restart (with "attempts": 1, the job goes on).
func TestOneExecutorLossIsOneFailure(t *testing.T) {
	for _, bOn := range []string{"e1", "e3"} {
		t.Run("b's output on "+bOn, func(t *testing.T) {
			h := newHarness(t)
			h.submit("j", `{"vertices":[{"id":"b","parallelism":1,"command":["x"]},
				{"id":"y","parallelism":1,"command":["x"],"slot_sharing_group":"g3"},
				{"id":"x","parallelism":1,"command":["x"],"slot_sharing_group":"g2"},
				{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}]},
				{"id":"d","parallelism":1,"command":["x"],"inputs":[{"from":"y","mode":"blocking"},{"from":"x","mode":"blocking"}]}],
				"restart":{"strategy":"fixed-delay","attempts":1,"delay":"1s"}}`)
			j := h.s.jobs["j"]
			for _, rr := range h.s.ReadyRegions() {
				h.place(rr, map[string]string{"b": bOn, "y": "e1", "x": "e2"}[j.Spec.Vertices[j.Regions[rr.Region].Vertices[0]].ID])
			}
			h.report(bOn, ReportUpdate{ID: "j/b/0/0", State: wire.StateFinished, Bytes: 1})
			h.report("e1", ReportUpdate{ID: "j/y/0/0", State: wire.StateFinished, Bytes: 1})
			h.report("e2", ReportUpdate{ID: "j/x/0/0", State: wire.StateRunning})
			h.placeAll("e1")
			h.report("e1", ReportUpdate{ID: "j/c/0/0", State: wire.StateRunning})
			h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})
			require.Equal(t, JobRestarting, h.job("j").Status, h.job("j").Message)
			require.Equal(t, 1, j.Backoff.Failures)
			checkInvariants(t, h.s)
		})
	}
}

// b feeds c and d; d also reads x, which still runs, so d waits. c runs
// (it has read b's output) when b's output is moved off a draining
// executor: b runs again for d, and c goes on with what it read.
func TestAReproducedPartitionsReadersThatReadItGoOn(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"b","parallelism":1,"command":["x"]},
		{"id":"x","parallelism":1,"command":["x"],"slot_sharing_group":"g2"},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}]},
		{"id":"d","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"},{"from":"x","mode":"blocking"}]}],
		"restart":{"strategy":"fixed-delay","attempts":5,"delay":"1s"}}`)
	for _, rr := range h.s.ReadyRegions() {
		h.place(rr, map[int]string{0: "e1", 1: "e2"}[rr.Region])
	}
	h.report("e1", ReportUpdate{ID: "j/b/0/0", State: wire.StateFinished, Bytes: 1})
	h.report("e2", ReportUpdate{ID: "j/x/0/0", State: wire.StateRunning})
	h.placeAll("e3")
	h.report("e3", ReportUpdate{ID: "j/c/0/0", State: wire.StateRunning})
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.NoError(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.Equal(t, wire.StateRunning, h.exec("j/c/0/0").State, "c has read b's output")
	checkInvariants(t, h.s)
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	require.Equal(t, []string{"j/b/0/1"}, execIDs(h.placeAll("e3")), "b runs again, for d")
	h.report("e3", ReportUpdate{ID: "j/b/0/1", State: wire.StateFinished, Bytes: 1}, ReportUpdate{ID: "j/c/0/0", State: wire.StateFinished})
	h.report("e2", ReportUpdate{ID: "j/x/0/0", State: wire.StateFinished, Bytes: 1})
	placed := h.placeAll("e3")
	require.Equal(t, []string{"j/d/0/0"}, execIDs(placed))
	require.Equal(t, "j/b/0/1", h.s.TaskSpecs(placed)[0].Inputs[0].Sources[0].Execution, "d reads b's new output")
	h.reportAll("e3", wire.StateFinished)
	require.Equal(t, JobFinished, h.job("j").Status)
	require.Zero(t, h.s.jobs["j"].Backoff.Failures, "a move is not counted")
	checkInvariants(t, h.s)
}

// A consumer that cannot fetch a partition the state still tracks (gone
// from its executor unnoticed) has its producer run again.
func TestAnUnreadableTrackedInputIsProducedAgain(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]},
		{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}]}],
		"restart":{"strategy":"fixed-delay","attempts":5,"delay":"1s"}}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "j/a/0/0", State: wire.StateFinished, Bytes: 1})
	h.placeAll("e2")
	h.report("e2", ReportUpdate{ID: "j/b/0/0", State: wire.StateFailed, Message: "input a/0 unavailable: 410",
		Unavailable: []string{"j/a/0/0"}})
	j := h.job("j")
	require.Equal(t, JobRestarting, j.Status)
	require.Contains(t, j.Message, "partition of a/0 unavailable to j/b/0/0")
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	placed := h.placeAll("e3")
	require.Equal(t, []string{"j/a/0/1"}, execIDs(placed), "a runs again; b waits for it")
	checkInvariants(t, h.s)
}

// TestTaskSpecsCarryResources: a deployment carries what its vertex
// declared (the executor caps the task there), and nothing for a vertex
// that declared nothing.
func TestTaskSpecsCarryResources(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"a","parallelism":1,"command":["x"],"resources":{"cpu_millis":250,"memory_mb":64}},
		{"id":"b","parallelism":1,"command":["x"]}]}`)
	placed := h.placeAll("e1")
	require.Len(t, placed, 2)
	got := map[string]wire.Resources{}
	for _, ts := range h.s.TaskSpecs(placed) {
		got[ts.Execution.Vertex] = ts.Resources
		one, ok := h.s.TaskSpec(ts.Execution.ID)
		require.True(t, ok)
		require.Equal(t, ts.Resources, one.Resources)
	}
	require.Equal(t, map[string]wire.Resources{"a": {CPUMillis: 250, MemoryMB: 64}, "b": {}}, got)
}

// A consumer's report of what it could not read counts only for the
// partitions it reads: another job's, or its own job's that it does not
// take as input, are left alone (an executor names what it could not
// read; it has no say over other jobs' partitions), and a name listed
// twice counts once.
func TestUnavailableCountsOnlyWhatTheConsumerReads(t *testing.T) {
	h := newHarness(t)
	finishGen(t, h) // job j: gen (2 subtasks, FINISHED, partitions on e1) feeds sum
	before := partitionIDs(h.s)
	require.Len(t, before, 2)
	h.submit("other", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":3,"delay":"1s"}}`)
	r := h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "other", Region: 0, Slots: []SlotAssign{{Group: "default", Index: 0, Executor: "e9", Slot: 0}}})
	require.NoError(t, r.Err)
	h.report("e9", ReportUpdate{ID: "other/v/0/0", State: wire.StateFailed, Message: "x",
		Unavailable: []string{"j/gen/0/0", "j/gen/1/0", "j/gen/0/0", "j/sum/0/0"}})
	require.Equal(t, before, partitionIDs(h.s), "another job's failure lost j's partitions")
	require.Equal(t, wire.StateFinished, h.exec("j/gen/0/0").State)
	require.NotContains(t, h.job("other").Message, "partition")
	checkInvariants(t, h.s)
}

// fanOut is R0 = {a, b} (a -> b pipelined), c reads a and d reads b
// (blocking), e reads c (blocking): R0 ran on e1, c on e2 (so a's output,
// read by c only, was released), e is deployed on e3, fetching c's output.
// place says whether d runs (on e4) or is left READY.
func fanOut(t *testing.T, placeD bool) (h *harness, rA, rC, rD, rE int) {
	h = newHarness(t)
	h.submit("j", `{"vertices":[
		{"id":"a","parallelism":1,"command":["x"],"slot_sharing_group":"g0"},
		{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","mode":"pipelined"}],"slot_sharing_group":"g0"},
		{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"a","mode":"blocking"}],"slot_sharing_group":"g1"},
		{"id":"d","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}],"slot_sharing_group":"g2"},
		{"id":"e","parallelism":1,"command":["x"],"inputs":[{"from":"c","mode":"blocking"}],"slot_sharing_group":"g3"}],
		"restart":{"strategy":"fixed-delay","attempts":5,"delay":"1s"}}`)
	j := h.s.jobs["j"]
	rA, rC, rD, rE = j.Vertices[0].Region, j.Vertices[2].Region, j.Vertices[3].Region, j.Vertices[4].Region
	require.Equal(t, rA, j.Vertices[1].Region)
	h.placeRegion("j", rA, "e1")
	h.report("e1", ReportUpdate{ID: "j/a/0/0", State: wire.StateFinished, Bytes: 1}, ReportUpdate{ID: "j/b/0/0", State: wire.StateFinished, Bytes: 1})
	h.placeRegion("j", rC, "e2")
	h.report("e2", ReportUpdate{ID: "j/c/0/0", State: wire.StateFinished, Bytes: 1})
	h.placeRegion("j", rE, "e3")
	if placeD {
		h.placeRegion("j", rD, "e4")
		h.report("e4", ReportUpdate{ID: "j/d/0/0", State: wire.StateRunning})
	}
	require.Equal(t, []string{"j/b/0/0@e1", "j/c/0/0@e2"}, partitionIDs(h.s), "a's output released once c finished")
	checkInvariants(t, h.s)
	return h, rA, rC, rD, rE
}

// c's output is lost while e fetches it: c runs again, and so does R0, whole,
// since c reads a's released output; d, which reads R0's b and was not
// placed yet, waits for R0 again rather than being placed on b's old
// output (which the restart drops) or its new attempt (not produced yet).
func TestAWholeProducerRestartHoldsItsOtherConsumersBack(t *testing.T) {
	h, rA, rC, rD, _ := fanOut(t, false)
	j := h.s.jobs["j"]
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e2"})
	require.Equal(t, RegionRestarting, j.Regions[rA].Status, "R0 restarts whole for c")
	require.Equal(t, RegionWaiting, j.Regions[rD].Status, "d waits for R0 again")
	h.report("e3", ReportUpdate{ID: "j/e/0/0", State: wire.StateCanceled})
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	checkInvariants(t, h.s)
	require.Equal(t, RegionReady, j.Regions[rA].Status)
	require.Equal(t, RegionWaiting, j.Regions[rC].Status)
	require.Equal(t, RegionWaiting, j.Regions[rD].Status)
	h.placeRegion("j", rA, "e1")
	h.report("e1", ReportUpdate{ID: "j/a/0/1", State: wire.StateFinished, Bytes: 1}, ReportUpdate{ID: "j/b/0/1", State: wire.StateFinished, Bytes: 1})
	placed := h.placeRegion("j", rD, "e4")
	require.Equal(t, "j/b/0/1", h.s.TaskSpecs(placed)[0].Inputs[0].Sources[0].Execution, "d reads b's new output")
	checkInvariants(t, h.s)
}

// The same with d running on b's output: the restart of R0 drops it, so d
// restarts with it, in the same restart (one failure for the strategy),
// rather than failing on its input afterwards.
func TestAWholeProducerRestartRestartsItsRunningConsumers(t *testing.T) {
	h, rA, _, rD, _ := fanOut(t, true)
	j := h.s.jobs["j"]
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e2"})
	require.Equal(t, RegionRestarting, j.Regions[rA].Status)
	require.Equal(t, RegionRestarting, j.Regions[rD].Status, "d restarts with R0")
	require.Equal(t, wire.StateCanceling, h.exec("j/d/0/0").State)
	require.Equal(t, 1, j.Backoff.Failures)
	h.report("e3", ReportUpdate{ID: "j/e/0/0", State: wire.StateCanceled})
	h.report("e4", ReportUpdate{ID: "j/d/0/0", State: wire.StateCanceled})
	h.now += 1000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	checkInvariants(t, h.s)
	require.Equal(t, RegionReady, j.Regions[rA].Status)
	require.Equal(t, RegionWaiting, j.Regions[rD].Status)
	require.Equal(t, 1, j.Backoff.Failures)
}

// An executor lost while it runs a consumer and holds partitions that
// consumer has yet to read: the consumer FAILED because its executor was
// lost (and says so), the restart's reason is the executor's loss, the
// partitions run again in that one restart, and one failure is counted.
func TestAConsumerLostWithThePartitionsItReadsFailsForTheExecutor(t *testing.T) {
	h := recordingHarness(t)
	finishGen(t, h) // gen/0 on e1, gen/1 on e2
	h.placeAll("e2")
	h.report("e2", ReportUpdate{ID: "j/sum/0/0", State: wire.StateRunning})
	h.takeLines()
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e2"})
	e := h.exec("j/sum/0/0")
	require.Equal(t, wire.StateFailed, e.State)
	require.Equal(t, "executor e2 lost", e.Message)
	var restarts []string
	for _, l := range h.takeLines() {
		if strings.Contains(l, "job-restart") {
			restarts = append(restarts, l)
		}
	}
	require.Len(t, restarts, 1, "one restart event")
	require.Contains(t, restarts[0], "reason="+ReasonExecutorLost)
	require.Equal(t, 1, h.s.jobs["j"].Backoff.Failures)
	checkInvariants(t, h.s)
	h.report("e1") // nothing changes on e1
	h.now += 10_000
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"})
	require.Equal(t, []string{"j/gen/1/1"}, execIDs(h.placeAll("e3")), "gen/1's output went with e2")
	checkInvariants(t, h.s)
}
