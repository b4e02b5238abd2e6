package fsm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

const noRestart = `{"name":"nr","vertices":[{"id":"v","parallelism":2,"command":["sleep","60"]}],
	"restart":{"strategy":"none"}}`

func TestDrainDeadlineMovesWorkWithoutCountingIt(t *testing.T) {
	h := newHarness(t)
	h.submit("nr", noRestart)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "nr/v/0/0", State: wire.StateRunning}, ReportUpdate{ID: "nr/v/1/0", State: wire.StateRunning})

	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1", DeadlineMs: 5000}).Err)
	require.True(t, h.s.Draining("e1"))
	require.False(t, h.s.Drained("e1"), "it still runs work")
	require.Empty(t, h.s.ToMove(h.now+4999), "before the deadline the work stays")
	require.Equal(t, []string{"e1"}, h.s.ToMove(h.now+5000))

	h.now += 5000
	require.NoError(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.Empty(t, h.s.ToMove(h.now), "what is left is being cancelled")
	for _, id := range []string{"nr/v/0/0", "nr/v/1/0"} {
		e, _ := h.s.Execution(id)
		require.Equal(t, wire.StateCanceling, e.State, id)
	}
	h.report("e1", ReportUpdate{ID: "nr/v/0/0", State: wire.StateCanceled, Message: "canceled by the leader"},
		ReportUpdate{ID: "nr/v/1/0", State: wire.StateCanceled, Message: "canceled by the leader"})
	for _, id := range []string{"nr/v/0/0", "nr/v/1/0"} {
		e, _ := h.s.Execution(id)
		require.Equal(t, "moved off draining executor e1", e.Message,
			"an attempt moved says why, not only that its executor cancelled it")
	}
	require.True(t, h.s.Drained("e1"))
	v, _ := h.s.Job("nr")
	require.Equal(t, JobRestarting, v.Status, "a strategy of none still lets moved work run again")
	require.Zero(t, h.s.jobs["nr"].Backoff.Failures)
	require.Equal(t, 1, v.UncountedRestarts, "the restart is one the strategy did not count")
	require.Equal(t, []string{"nr"}, h.s.RestartsDue(h.now), "at once, without the strategy's delay")
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "nr"})
	h.placeAll("e2")
	v, _ = h.s.Job("nr")
	require.Equal(t, JobRunning, v.Status)
	for _, e := range v.Vertices[0].Subtasks {
		require.Equal(t, "e2", e.Executor)
		require.Equal(t, 1, e.Attempt)
	}
	checkInvariants(t, h.s)

	// Undrained, it is eligible again.
	require.NoError(t, h.apply(&UndrainExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.False(t, h.s.Draining("e1"))
	require.ErrorIs(t, h.apply(&UndrainExecutor{Fenced: h.fenced(), Executor: "e1"}).Err, ErrNotDraining)
	require.ErrorIs(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e1"}).Err, ErrNotDraining)
}

func TestDrainMovesNeededPartitionsAndDropsTheRest(t *testing.T) {
	h := newHarness(t)
	h.submit("d", `{"vertices":[{"id":"gen","parallelism":2,"command":["true"]},
		{"id":"sum","parallelism":1,"command":["true"],"inputs":[{"from":"gen","mode":"blocking"}]}],
		"restart":{"strategy":"none"}}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "d/gen/0/0", State: wire.StateFinished, Bytes: 3}, ReportUpdate{ID: "d/gen/1/0", State: wire.StateFinished, Bytes: 4})
	require.Len(t, h.s.PartitionsOn("e1"), 2)
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.False(t, h.s.Drained("e1"), "it holds partitions a consumer needs")
	require.Equal(t, []string{"e1"}, h.s.ToMove(h.now))
	require.NoError(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.True(t, h.s.Drained("e1"))
	v, _ := h.s.Job("d")
	require.Equal(t, JobRestarting, v.Status)
	require.Contains(t, v.Message, "moved off draining executor e1")
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "d"})
	v, _ = h.s.Job("d")
	for i, p := range v.Vertices[0].Previous {
		require.Equal(t, PreviousAttempt{Attempt: 0, State: wire.StateFinished, EndTime: p.EndTime, Executor: "e1",
			Message: "ran again: partitions of gen/0, gen/1 moved off draining executor e1"}, p, "gen/%d: a FINISHED attempt that ran again says why", i)
	}
	h.placeAll("e2")
	h.report("e2", ReportUpdate{ID: "d/gen/0/1", State: wire.StateFinished}, ReportUpdate{ID: "d/gen/1/1", State: wire.StateFinished})
	h.placeAll("e2")
	h.report("e2", ReportUpdate{ID: "d/sum/0/0", State: wire.StateFinished})
	v, _ = h.s.Job("d")
	require.Equal(t, JobFinished, v.Status)
	checkInvariants(t, h.s)
}

func TestDrainEventsAndSelfDrainOfAnotherInstance(t *testing.T) {
	h := newHarness(t)
	h.s.RecordEvents()
	h.s.TakeEvents()
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1", DeadlineMs: 1000, Self: true, Instance: "run1"}).Err)
	evs := h.s.TakeEvents()
	require.Len(t, evs, 1)
	require.Equal(t, EventExecutorStatus, evs[0].Type)
	require.Equal(t, ExecutorDrainingStatus, evs[0].State)
	require.Equal(t, "e1", evs[0].Executor)
	require.Equal(t, "draining, deadline in 1s", evs[0].Message)

	// The same instance answering does not end its own drain; another does.
	r := h.apply(&UndrainExecutor{Fenced: h.fenced(), Executor: "e1", Instance: "run1"})
	require.NoError(t, r.Err)
	require.True(t, r.Unchanged)
	require.True(t, h.s.Draining("e1"))
	require.NoError(t, h.apply(&UndrainExecutor{Fenced: h.fenced(), Executor: "e1", Instance: "run2"}).Err)
	require.False(t, h.s.Draining("e1"))
	evs = h.s.TakeEvents()
	require.Equal(t, ExecutorEligibleStatus, evs[len(evs)-1].State)

	// An operator's drain is not ended by an instance.
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.True(t, h.apply(&UndrainExecutor{Fenced: h.fenced(), Executor: "e1", Instance: "run3"}).Unchanged)
	require.True(t, h.s.Draining("e1"))

	require.Error(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1", DeadlineMs: -1}).Err)
	require.Error(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "", DeadlineMs: 1}).Err)
}

// Before its deadline a drain moves off at once what costs nothing to
// move: once nothing runs on the executor and every partition there has
// been read by all of its consumers. While a consumer has yet to read one,
// or a task runs there, the work waits for the deadline, and a move
// proposed meanwhile is refused.
func TestADrainMovesAtOnceWhatCostsNothing(t *testing.T) {
	h := newHarness(t)
	finishGen(t, h) // gen/0 on e1, gen/1 on e2; sum reads both
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1", DeadlineMs: 60_000}).Err)
	require.Empty(t, h.s.ToMove(h.now), "sum has yet to read gen/0")
	require.False(t, h.s.FreeToMove("e1"))
	require.ErrorIs(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e1"}).Err, ErrNotDue)
	require.Equal(t, []string{"j/gen/0/0@e1", "j/gen/1/0@e2"}, partitionIDs(h.s), "a refused move drops nothing")

	h.placeAll("e3")
	require.Empty(t, h.s.ToMove(h.now), "sum is placed but has not started")
	h.report("e3", ReportUpdate{ID: "j/sum/0/0", State: wire.StateRunning})
	require.Equal(t, []string{"e1"}, h.s.ToMove(h.now), "sum runs: it has read gen/0")
	require.NoError(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.True(t, h.s.Drained("e1"))
	require.Equal(t, []string{"j/gen/1/0@e2"}, partitionIDs(h.s))
	require.Equal(t, JobRunning, h.job("j").Status, "nothing restarts")
	require.Equal(t, wire.StateRunning, h.exec("j/sum/0/0").State)
	require.Empty(t, h.s.ToMove(h.now+60_000), "nothing is left to move at the deadline")
	checkInvariants(t, h.s)
}

// A task running on the draining executor keeps it from moving early,
// even when every partition there has been read: the task may run until
// the deadline.
func TestADrainWithATaskRunningWaitsForTheDeadline(t *testing.T) {
	h := newHarness(t)
	finishGen(t, h)
	h.placeAll("e1") // sum on e1 itself (placed before the drain)
	h.report("e1", ReportUpdate{ID: "j/sum/0/0", State: wire.StateRunning})
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1", DeadlineMs: 60_000}).Err)
	require.Empty(t, h.s.ToMove(h.now))
	require.ErrorIs(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e1"}).Err, ErrNotDue)
	require.Equal(t, wire.StateRunning, h.exec("j/sum/0/0").State)

	h.report("e1", ReportUpdate{ID: "j/sum/0/0", State: wire.StateFinished})
	require.Equal(t, JobFinished, h.job("j").Status)
	require.True(t, h.s.Drained("e1"), "the job ended: its partitions are released")
	require.Empty(t, h.s.ToMove(h.now))
	checkInvariants(t, h.s)
}

// A move that restarts several regions of a job lets each subtask run once
// more: the job counts one restart the strategy did not count, not one a
// region.
func TestAMoveOfSeveralRegionsIsOneUncountedRestart(t *testing.T) {
	h := newHarness(t)
	h.submit("three", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]},{"id":"b","parallelism":1,"command":["x"]},
		{"id":"c","parallelism":1,"command":["x"]}],"restart":{"strategy":"none"}}`)
	h.placeAll("e1")
	h.reportAll("e1", wire.StateRunning)
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	require.NoError(t, h.apply(&MoveExecutor{Fenced: h.fenced(), Executor: "e1"}).Err)
	for _, r := range h.s.jobs["three"].Regions {
		require.Equal(t, RegionRestarting, r.Status, "every region restarts")
	}
	require.Equal(t, 1, h.job("three").UncountedRestarts)
}
