package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// A job's read costs a subtask per subtask, and a subtask's worth per
// 100 bytes of the messages its attempts carry (a message may be escaped
// to six times its bytes in JSON): a job of failures with long messages
// counts for what its answer weighs.
func TestJobReadCostCountsMessages(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"v","parallelism":10,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":1,"delay":"0s"}}`)
	require.Equal(t, 10, h.s.JobReadCost("j"))
	require.Zero(t, h.s.JobReadCost("nope"))
	h.placeAll("e1")
	msg := strings.Repeat("<", 1000)
	for i := range 10 {
		h.report("e1", ReportUpdate{ID: "j/v/" + string(rune('0'+i)) + "/0", State: wire.StateFailed, Message: msg})
	}
	require.Equal(t, 10+6*10*1000/readUnit, h.s.JobReadCost("j"))
}

// A job's view says how many new slots its region that is ready, and
// not placed, needs at once: what a client says of a job whose later
// region waits for slots.
func TestAJobViewSaysWhatItsReadyRegionNeeds(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices": [{"id": "a", "parallelism": 1, "command": ["x"]},
		{"id": "b", "parallelism": 5, "command": ["x"], "inputs": [{"from": "a", "mode": "blocking"}]}]}`)
	require.Equal(t, 1, h.job("j").WaitingSlots, "the first region")
	h.placeRegion("j", 0, "e1")
	require.Zero(t, h.job("j").WaitingSlots, "placed; the second waits for the first")
	h.reportAll("e1", wire.StateRunning)
	h.reportAll("e1", wire.StateFinished)
	require.Equal(t, 5, h.job("j").WaitingSlots, "the second region, its input finished")
	h.placeRegion("j", 1, "e1")
	require.Zero(t, h.job("j").WaitingSlots)
}

// A ready region's waiting slots are the keys no live execution of the
// job holds, as the scheduler lists them: a (8 wide) still runs subtasks
// 4 to 7 when b (4 wide) is ready, and b needs keys 0 to 3, all free of
// the job's (counting every slot of the group held, it said 0).
func TestWaitingSlotsCountTheKeysTheRegionNeeds(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, h.submit("j", `{"vertices": [{"id": "a", "parallelism": 8, "command": ["x"]},
		{"id": "c", "parallelism": 1, "command": ["x"]},
		{"id": "b", "parallelism": 4, "command": ["x"], "inputs": [{"from": "c", "mode": "blocking"}]}]}`).Err)
	h.placeAll("e1")
	h.reportAll("e1", wire.StateRunning)
	var ups []ReportUpdate
	for i := range 4 {
		ups = append(ups, ReportUpdate{ID: fmt.Sprintf("j/a/%d/0", i), State: wire.StateFinished})
	}
	ups = append(ups, ReportUpdate{ID: "j/c/0/0", State: wire.StateFinished})
	h.report("e1", ups...)
	b := h.s.jobs["j"].Vertices[2].Region
	require.Equal(t, RegionReady, h.s.jobs["j"].Regions[b].Status)
	keys := 0
	for _, rr := range h.s.ReadyRegions() {
		if rr.Job == "j" && rr.Region == b {
			for _, k := range rr.Keys {
				if !k.Held {
					keys++
				}
			}
		}
	}
	require.Equal(t, 4, keys, "what the scheduler asks for")
	require.Equal(t, 4, h.job("j").WaitingSlots)
}

// A ready region that would join a slot the job holds on a draining
// executor waits for it (the leader gives a draining executor no new
// work): the view names that executor.
func TestAJobViewNamesTheDrainItsReadyRegionWaitsFor(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, h.submit("j", `{"vertices": [{"id": "a", "parallelism": 2, "command": ["x"]},
		{"id": "b", "parallelism": 2, "command": ["x"]},
		{"id": "c", "parallelism": 2, "command": ["x"], "inputs": [{"from": "b", "mode": "blocking", "distribution": "forward"}]}]}`).Err)
	h.placeAll("e1")
	h.reportAll("e1", wire.StateRunning)
	h.report("e1", ReportUpdate{ID: "j/b/0/0", State: wire.StateFinished}, ReportUpdate{ID: "j/b/1/0", State: wire.StateFinished})
	require.Empty(t, h.job("j").WaitingForDrain, "no drain")
	require.NoError(t, h.apply(&DrainExecutor{Fenced: h.fenced(), Executor: "e1", DeadlineMs: 60_000}).Err)
	require.Equal(t, "e1", h.job("j").WaitingForDrain, "c would join a's slots on e1")
	require.Equal(t, h.now+60_000, h.job("j").WaitingForDrainDeadline, "until the drain's deadline at the latest")
	require.Zero(t, h.job("j").WaitingSlots, "it needs no new slot")
	h.report("e1", ReportUpdate{ID: "j/a/0/0", State: wire.StateFinished}, ReportUpdate{ID: "j/a/1/0", State: wire.StateFinished})
	require.Empty(t, h.job("j").WaitingForDrain, "a ended: c needs new slots, elsewhere")
	require.Zero(t, h.job("j").WaitingForDrainDeadline)
	require.Equal(t, 2, h.job("j").WaitingSlots)
}

// AttemptsOf names a subtask's current attempt and, once it restarted,
// the one before it with the executor it ran on, and what the job has
// when it has not that subtask.
func TestAttemptsOf(t *testing.T) {
	h := newHarness(t)
	h.establish("m1")
	require.NoError(t, h.submit("j", `{"vertices":[{"id":"a","parallelism":3,"command":["x"]},{"id":"b","parallelism":2,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":3,"delay":"0s"}}`).Err)
	h.placeAll("e1")
	a := h.s.AttemptsOf("j", "b", 1)
	require.True(t, a.HasCurrent)
	require.Equal(t, "j/b/1/0", a.Current.ID)
	require.Equal(t, "e1", a.Current.Executor)
	require.Equal(t, []string{"a", "b"}, a.Vertices)
	require.Equal(t, 2, a.Parallelism)
	require.Zero(t, a.Previous, "at its first attempt")

	// Restarted: the attempt before the current one, and where it ran.
	h.report("e1", ReportUpdate{ID: "j/b/1/0", State: wire.StateFailed, Message: "boom"})
	for _, e := range h.s.Expected("e1") {
		if e.State == wire.StateCanceling {
			h.report("e1", ReportUpdate{ID: e.ID, State: wire.StateCanceled})
		}
	}
	require.NoError(t, h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"}).Err)
	a = h.s.AttemptsOf("j", "b", 1)
	require.True(t, a.HasCurrent)
	require.Equal(t, "j/b/1/1", a.Current.ID)
	require.Empty(t, a.Current.Executor, "not placed yet")
	require.Equal(t, PreviousAttempt{Attempt: 0, State: wire.StateFailed, Message: "boom", EndTime: h.now, Executor: "e1"}, a.Previous)

	a = h.s.AttemptsOf("j", "b", 2)
	require.False(t, a.HasCurrent, "no subtask 2")
	require.Zero(t, a.Previous)
	require.Equal(t, 2, a.Parallelism)
	a = h.s.AttemptsOf("j", "c", 0)
	require.False(t, a.HasCurrent)
	require.Equal(t, []string{"a", "b"}, a.Vertices)
	require.Zero(t, a.Parallelism, "no vertex c")
	a = h.s.AttemptsOf("nope", "a", 0)
	require.False(t, a.HasCurrent)
	require.Nil(t, a.Vertices)
}
