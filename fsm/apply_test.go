package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/jobspec"
	"jobmaster/wire"
)

// pipeline: source -pipelined-> map -blocking-> sink.
const pipeline = `{"name":"pipeline","vertices":[
	{"id":"source","parallelism":2,"command":["true"]},
	{"id":"map","parallelism":2,"command":["true"],"inputs":[{"from":"source"}]},
	{"id":"sink","parallelism":1,"command":["true"],"inputs":[{"from":"map","mode":"blocking"}]}],
	"restart":{"strategy":"fixed-delay","attempts":2,"delay":"1s"}}`

func TestEstablishLeadershipSetsEpoch(t *testing.T) {
	h := newHarness(t)
	require.Equal(t, uint64(1), h.s.Epoch())
	require.Equal(t, "m1", h.s.Leader())
	h.submit("a", pipeline)
	h.establish("m2")
	require.Equal(t, uint64(3), h.s.Epoch())
	require.Equal(t, "m2", h.s.Leader())

	// The first leader names the cluster; later ones keep the name unless
	// they set a new one (after a restore).
	require.NoError(t, h.apply(&EstablishLeadership{Node: "m1", Cluster: "c1"}).Err)
	require.NoError(t, h.apply(&EstablishLeadership{Node: "m2"}).Err)
	require.Equal(t, "c1", h.s.Cluster())
	var buf bytes.Buffer
	_, err := h.s.Capture().WriteTo(&buf)
	require.NoError(t, err)
	r, err := Restore(&buf)
	require.NoError(t, err)
	require.Equal(t, "c1", r.Cluster())
}

func TestStaleTokenChangesNothing(t *testing.T) {
	h := newHarness(t)
	old := h.token
	h.establish("m2")
	before := h.s.Capture().Hash()
	cmds := []Command{
		&SubmitJob{Fenced: Fenced{Token: old}, ID: "a", Spec: parseSpec(t, pipeline)},
		&CancelJob{Fenced: Fenced{Token: old}, ID: "a"},
		&ExecutorLost{Fenced: Fenced{Token: old}, Executor: "e1"},
		&SubmitJob{Fenced: Fenced{Token: h.token + 100}, ID: "a", Spec: parseSpec(t, pipeline)},
	}
	for _, c := range cmds {
		r := h.apply(c)
		require.ErrorIs(t, r.Err, ErrStaleToken, "%s", c.Type())
	}
	require.Equal(t, before, h.s.Capture().Hash())
	require.Zero(t, h.s.NumJobs())
}

func TestSubmitIsIdempotentByID(t *testing.T) {
	h := newHarness(t)
	r := h.submit("a", pipeline)
	require.NoError(t, r.Err)
	require.True(t, r.Created)
	hash := h.s.Capture().Hash()

	r = h.submit("a", pipeline)
	require.NoError(t, r.Err)
	require.False(t, r.Created)
	require.Equal(t, hash, h.s.Capture().Hash())

	r = h.submit("a", `{"vertices":[{"id":"x","parallelism":1,"command":["true"]}]}`)
	require.ErrorIs(t, r.Err, ErrConflict)
	require.Equal(t, hash, h.s.Capture().Hash())

	j := h.job("a")
	require.Equal(t, JobCreated, j.Status)
	require.Len(t, j.Vertices, 3)
	for _, v := range j.Vertices {
		for _, e := range v.Subtasks {
			require.Equal(t, wire.StateScheduled, e.State)
			require.Equal(t, 0, e.Attempt)
		}
	}
	// Only the first region is ready: the sink waits for map to finish.
	ready := h.s.ReadyRegions()
	require.Len(t, ready, 1)
	require.Equal(t, 0, ready[0].Region)
	require.Equal(t, 4, ready[0].Executions)
	require.Len(t, ready[0].Keys, 2, "source and map share slots")
}

func TestJobRunsToFinished(t *testing.T) {
	h := newHarness(t)
	h.submit("a", pipeline)
	placed := h.placeAll("e1")
	require.Len(t, placed, 4)
	slot := map[int]int{}
	for _, e := range placed {
		require.Equal(t, wire.StateDeploying, e.State)
		require.False(t, e.Deployed, "pending until acknowledged")
		require.Equal(t, h.token, e.Epoch)
		if prev, ok := slot[e.Subtask]; ok {
			require.Equal(t, prev, e.Slot, "subtask %d of source and map share a slot", e.Subtask)
		}
		slot[e.Subtask] = e.Slot
	}
	require.Equal(t, JobRunning, h.job("a").Status)
	require.Equal(t, []int{0, 1}, h.s.UsedSlots()["e1"])

	h.now += 250
	started := h.now
	h.reportAll("e1", wire.StateRunning)
	e := h.exec("a/source/0/0")
	require.True(t, e.Deployed)
	require.Equal(t, wire.StateRunning, e.State)
	require.Equal(t, started, e.StartTime, "the start is the recording command's time")
	h.now += 250
	h.reportAll("e1", wire.StateRunning)
	require.Equal(t, started, h.exec("a/source/0/0").StartTime, "a later RUNNING report is no new start")

	r := h.report("e1", ReportUpdate{ID: "a/source/0/0", State: wire.StateFinished})
	require.Equal(t, []string{"a/source/0/0"}, r.Terminal)
	require.Len(t, h.s.Expected("e1"), 3, "terminal executions leave the expected set")
	h.reportAll("e1", wire.StateFinished)
	require.Empty(t, h.s.UsedSlots()["e1"])

	// The sink's region is ready once map finished.
	placed = h.placeAll("e1")
	require.Len(t, placed, 1)
	require.Equal(t, "a/sink/0/0", placed[0].ID)
	h.reportAll("e1", wire.StateFinished)
	j := h.job("a")
	require.Equal(t, JobFinished, j.Status)
	require.Equal(t, h.now, j.EndTime)
	checkInvariants(t, h.s)
}

func TestTerminalStateRecordedOnce(t *testing.T) {
	h := newHarness(t)
	h.submit("a", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "a/v/0/0", State: wire.StateFinished})
	hash := h.s.Capture().Hash()
	h.now += 5000
	// A later report of the same or another terminal state changes nothing,
	// and is acknowledged so the executor forgets it.
	r := h.report("e1", ReportUpdate{ID: "a/v/0/0", State: wire.StateFailed})
	require.Equal(t, []string{"a/v/0/0"}, r.Terminal)
	require.Equal(t, hash, h.s.Capture().Hash())
	// A terminal report of an execution nobody knows is acknowledged too.
	r = h.report("e1", ReportUpdate{ID: "zz/v/0/0", State: wire.StateCanceled})
	require.Equal(t, []string{"zz/v/0/0"}, r.Terminal)
}

func TestReportFromWrongExecutorIsIgnored(t *testing.T) {
	h := newHarness(t)
	h.submit("a", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	h.placeAll("e1")
	r := h.report("e2", ReportUpdate{ID: "a/v/0/0", State: wire.StateRunning})
	require.Empty(t, r.Terminal)
	e := h.exec("a/v/0/0")
	require.Equal(t, wire.StateDeploying, e.State)
	require.False(t, e.Deployed)
}

func TestPlaceRejectsStalePlans(t *testing.T) {
	h := newHarness(t)
	h.submit("a", `{"vertices":[{"id":"v","parallelism":2,"command":["true"]}]}`)
	h.submit("b", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	r := h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "a", Region: 0, Slots: []SlotAssign{
		{Group: "default", Index: 0, Executor: "e1", Slot: 0},
	}})
	require.ErrorIs(t, r.Err, ErrRejected, "one slot for two keys")
	r = h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "a", Region: 0, Slots: []SlotAssign{
		{Group: "default", Index: 0, Executor: "e1", Slot: 0},
		{Group: "default", Index: 1, Executor: "e1", Slot: 1},
	}})
	require.NoError(t, r.Err)
	hash := h.s.Capture().Hash()
	// The same region again: no longer ready.
	r = h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "a", Region: 0, Slots: []SlotAssign{
		{Group: "default", Index: 0, Executor: "e2", Slot: 0},
		{Group: "default", Index: 1, Executor: "e2", Slot: 1},
	}})
	require.ErrorIs(t, r.Err, ErrRejected)
	// Another job into a taken slot.
	r = h.apply(&PlaceRegion{Fenced: h.fenced(), Job: "b", Region: 0, Slots: []SlotAssign{
		{Group: "default", Index: 0, Executor: "e1", Slot: 1},
	}})
	require.ErrorIs(t, r.Err, ErrRejected)
	require.Equal(t, hash, h.s.Capture().Hash())
	checkInvariants(t, h.s)
}

func TestConcurrentRegionsShareSlots(t *testing.T) {
	// Two independent sources run at once; subtask i of both share a slot.
	h := newHarness(t)
	h.submit("a", `{"vertices":[{"id":"x","parallelism":2,"command":["true"]},{"id":"y","parallelism":3,"command":["true"]}]}`)
	placed := h.placeAll("e1")
	require.Len(t, placed, 5)
	require.Equal(t, []int{0, 1, 2}, h.s.UsedSlots()["e1"])
	for _, e := range placed {
		require.Equal(t, e.Subtask, e.Slot)
	}
	checkInvariants(t, h.s)
}

func TestRegionFailoverRestartsOnlyTheFailedRegion(t *testing.T) {
	h := newHarness(t)
	h.submit("a", `{"vertices":[
		{"id":"x","parallelism":2,"command":["true"]},
		{"id":"y","parallelism":1,"command":["true"],"slot_sharing_group":"other"}],
		"restart":{"strategy":"fixed-delay","attempts":1,"delay":"2s"}}`)
	h.placeAll("e1")
	h.reportAll("e1", wire.StateRunning)

	h.report("e1", ReportUpdate{ID: "a/x/0/0", State: wire.StateFailed, Message: "exit status 3"})
	j := h.job("a")
	require.Equal(t, JobRestarting, j.Status)
	require.Contains(t, j.Message, "a/x/0/0 FAILED: exit status 3")
	require.Equal(t, wire.StateCanceling, h.exec("a/x/1/0").State, "the rest of the region is cancelled")
	require.Equal(t, wire.StateRunning, h.exec("a/y/0/0").State, "other regions are left alone")

	// Not due before the delay nor while x/1 is still being cancelled.
	h.now += 2000
	require.Empty(t, h.s.RestartsDue(h.now))
	h.report("e1", ReportUpdate{ID: "a/x/1/0", State: wire.StateCanceled})
	require.Equal(t, []string{"a"}, h.s.RestartsDue(h.now))
	require.Empty(t, h.s.RestartsDue(h.now-1))

	require.NoError(t, h.apply(&RestartRegions{Fenced: h.fenced(), Job: "a"}).Err)
	j = h.job("a")
	require.Equal(t, JobRunning, j.Status)
	require.Equal(t, 1, j.Restarts)
	require.Equal(t, 1, j.Vertices[0].Subtasks[0].Attempt)
	require.Equal(t, wire.StateScheduled, j.Vertices[0].Subtasks[0].State)
	_, ok := h.s.Execution("a/x/0/0")
	require.False(t, ok, "ended attempts are dropped on restart")
	checkInvariants(t, h.s)

	// The second failure exhausts the one allowed restart.
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "a/x/0/1", State: wire.StateFailed})
	j = h.job("a")
	require.Equal(t, JobFailing, j.Status)
	require.Contains(t, j.Message, "allows 1 restart")
	require.Equal(t, wire.StateCanceling, h.exec("a/y/0/0").State)
	h.reportAll("e1", wire.StateCanceled)
	require.Equal(t, JobFailed, h.job("a").Status)
	checkInvariants(t, h.s)
}

func TestFullFailoverRestartsEverythingStarted(t *testing.T) {
	h := newHarness(t)
	h.submit("a", `{"vertices":[
		{"id":"x","parallelism":1,"command":["true"]},
		{"id":"y","parallelism":1,"command":["true"],"slot_sharing_group":"other"},
		{"id":"z","parallelism":1,"command":["true"],"inputs":[{"from":"x","mode":"blocking"}]}],
		"failover":"full","restart":{"strategy":"fixed-delay","attempts":5,"delay":"0s"}}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "a/x/0/0", State: wire.StateFinished})
	h.report("e1", ReportUpdate{ID: "a/y/0/0", State: wire.StateFailed})
	require.Equal(t, []string{"a"}, h.s.RestartsDue(h.now), "x finished, y failed: nothing to wait for")
	// z was ready (x finished) and is part of the restart too.
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "a"})
	j := h.job("a")
	for _, v := range j.Vertices {
		require.Equal(t, 1, v.Subtasks[0].Attempt, v.ID)
	}
	ready := h.s.ReadyRegions()
	require.Len(t, ready, 2, "x and y ready, z waits for x again")
	checkInvariants(t, h.s)
}

func TestCancelJob(t *testing.T) {
	h := newHarness(t)
	h.submit("a", pipeline)
	h.placeAll("e1")
	h.reportAll("e1", wire.StateRunning)
	require.NoError(t, h.apply(&CancelJob{Fenced: h.fenced(), ID: "a"}).Err)
	j := h.job("a")
	require.Equal(t, JobCancelling, j.Status)
	require.Equal(t, wire.StateCanceling, j.Vertices[0].Subtasks[0].State)
	require.Equal(t, wire.StateCanceled, j.Vertices[2].Subtasks[0].State, "never placed: cancelled at once")
	require.Empty(t, h.s.ReadyRegions())
	h.reportAll("e1", wire.StateCanceled)
	require.Equal(t, JobCanceled, h.job("a").Status)
	// Cancelling again, or an unknown job.
	require.NoError(t, h.apply(&CancelJob{Fenced: h.fenced(), ID: "a"}).Err)
	require.ErrorIs(t, h.apply(&CancelJob{Fenced: h.fenced(), ID: "nope"}).Err, ErrNotFound)
	checkInvariants(t, h.s)
}

func TestFailExecutionsMissing(t *testing.T) {
	h := newHarness(t)
	h.submit("a", `{"vertices":[{"id":"v","parallelism":2,"command":["true"]}],"restart":{"strategy":"none"}}`)
	h.placeAll("e1")
	h.reportAll("e1", wire.StateRunning)
	// Wrong executor: ignored.
	h.apply(&FailExecutions{Fenced: h.fenced(), Executor: "e2", IDs: []string{"a/v/0/0"}, Reason: "missing"})
	require.Equal(t, wire.StateRunning, h.exec("a/v/0/0").State)

	h.apply(&FailExecutions{Fenced: h.fenced(), Executor: "e1", IDs: []string{"a/v/0/0"}, Reason: "missing on e1"})
	require.Equal(t, wire.StateFailed, h.exec("a/v/0/0").State)
	require.Equal(t, "missing on e1", h.exec("a/v/0/0").Message)
	require.Equal(t, JobFailing, h.job("a").Status)
	// A cancelling execution that goes missing is simply cancelled.
	h.apply(&FailExecutions{Fenced: h.fenced(), Executor: "e1", IDs: []string{"a/v/1/0"}, Reason: "missing"})
	require.Equal(t, wire.StateCanceled, h.exec("a/v/1/0").State)
	require.Equal(t, JobFailed, h.job("a").Status)
	checkInvariants(t, h.s)
}

func TestExecutorLost(t *testing.T) {
	h := newHarness(t)
	h.submit("a", `{"vertices":[{"id":"v","parallelism":2,"command":["true"]}]}`)
	h.submit("b", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	h.placeAll("e1")
	h.reportAll("e1", wire.StateRunning)
	h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})
	require.Empty(t, h.s.Expected("e1"))
	require.Empty(t, h.s.UsedSlots())
	for _, id := range []string{"a", "b"} {
		j := h.job(id)
		require.Equal(t, JobRestarting, j.Status, id)
		require.Contains(t, j.Message, "executor e1 lost")
	}
	// Both of a's subtasks failed in one event: one failure counted.
	a, _ := h.s.jobs["a"]
	require.Equal(t, 1, a.Backoff.Failures)
	checkInvariants(t, h.s)
}

func TestUnexpectedCancelIsAFailure(t *testing.T) {
	h := newHarness(t)
	h.submit("a", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "a/v/0/0", State: wire.StateCanceled, Message: "lease expired"})
	require.Equal(t, JobRestarting, h.job("a").Status)
}

func TestRestartStrategies(t *testing.T) {
	type step struct {
		at    int64
		ok    bool
		delay int64
	}
	cases := []struct {
		name  string
		spec  string
		steps []step
	}{
		{"none", `{"strategy":"none"}`, []step{{0, false, 0}}},
		{"fixed-delay", `{"strategy":"fixed-delay","attempts":2,"delay":"3s"}`,
			[]step{{0, true, 3000}, {10, true, 3000}, {20, false, 0}}},
		{"failure-rate", `{"strategy":"failure-rate","max_failures":2,"interval":"10s","delay":"1s"}`,
			[]step{{0, true, 1000}, {5000, true, 1000}, {9000, false, 0}}},
		{"failure-rate window slides", `{"strategy":"failure-rate","max_failures":2,"interval":"10s","delay":"1s"}`,
			[]step{{0, true, 1000}, {5000, true, 1000}, {10000, true, 1000}, {14000, false, 0}}},
		{"exponential", `{"strategy":"exponential-delay","initial_delay":"1s","max_delay":"5s","multiplier":2,"jitter":0}`,
			[]step{{0, true, 1000}, {1, true, 2000}, {2, true, 4000}, {3, true, 5000}, {4, true, 5000}}},
		{"exponential reset", `{"strategy":"exponential-delay","initial_delay":"1s","multiplier":3,"jitter":0,"reset_threshold":"1m","attempts":2}`,
			[]step{{0, true, 1000}, {1, true, 3000}, {2, false, 0}, {70000, true, 1000}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := parseSpec(t, `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}],"restart":`+c.spec+`}`)
			var st RestartState
			for i, s := range c.steps {
				ok, d, why := decideRestart(spec.Restart, &st, s.at, jitterSeed("j", i))
				require.Equal(t, s.ok, ok, "step %d: %s", i, why)
				require.Equal(t, s.delay, d, "step %d", i)
				if !ok {
					require.NotEmpty(t, why)
				}
			}
		})
	}
}

func TestExponentialJitterStaysInBounds(t *testing.T) {
	spec := parseSpec(t, `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}],
		"restart":{"strategy":"exponential-delay","initial_delay":"10s","max_delay":"10s","jitter":0.5}}`)
	seen := map[int64]bool{}
	for i := 0; i < 200; i++ {
		st := RestartState{}
		ok, d, _ := decideRestart(spec.Restart, &st, 0, jitterSeed("job", i))
		require.True(t, ok)
		require.GreaterOrEqual(t, d, int64(5000))
		require.LessOrEqual(t, d, int64(10000))
		seen[d] = true
	}
	require.Greater(t, len(seen), 50, "jitter spreads the delays")
}

func TestForgetJobsRemovesOnlyEndedJobs(t *testing.T) {
	h := newHarness(t)
	h.submit("done", `{"vertices":[{"id":"v","parallelism":2,"command":["true"]}]}`)
	h.submit("busy", `{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "done/v/0/0", State: wire.StateFinished}, ReportUpdate{ID: "done/v/1/0", State: wire.StateFinished})
	require.Equal(t, JobFinished, h.job("done").Status)
	require.Equal(t, []string{"done"}, h.s.EndedBefore(h.now+1, 10))
	require.Empty(t, h.s.EndedBefore(h.now, 10), "ended at now, not before")
	require.NoError(t, h.apply(&ForgetJobs{Fenced: h.fenced(), IDs: []string{"done", "busy", "nope"}}).Err)
	_, ok := h.s.Job("done")
	require.False(t, ok)
	_, ok = h.s.Job("busy")
	require.True(t, ok, "a running job is never forgotten")
	require.Equal(t, 1, h.s.NumExecutions())
	checkInvariants(t, h.s)
	// The id is free again.
	require.True(t, h.submit("done", `{"vertices":[{"id":"w","parallelism":1,"command":["true"]}]}`).Created)
}

func TestResubmittedIDNeverReusesExecutionIDs(t *testing.T) {
	h := newHarness(t)
	h.submit("a", `{"vertices":[{"id":"v","parallelism":2,"command":["true"]}],"restart":{"strategy":"fixed-delay","attempts":3,"delay":"0s"}}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "a/v/0/0", State: wire.StateFailed})
	h.report("e1", ReportUpdate{ID: "a/v/1/0", State: wire.StateCanceled})
	h.apply(&RestartRegions{Fenced: h.fenced(), Job: "a"})
	h.apply(&CancelJob{Fenced: h.fenced(), ID: "a"})
	h.apply(&ForgetJobs{Fenced: h.fenced(), IDs: []string{"a"}})
	// The same id again: attempts continue after the forgotten job's.
	h.submit("a", `{"vertices":[{"id":"v","parallelism":2,"command":["true"]}]}`)
	j := h.job("a")
	require.Equal(t, "a/v/0/2", j.Vertices[0].Subtasks[0].ID)
	require.Equal(t, 2, j.Vertices[0].Subtasks[1].Attempt)
	require.Empty(t, h.s.forgotten, "the tombstone is used up")
	// Tombstones are pruned by age.
	h.apply(&CancelJob{Fenced: h.fenced(), ID: "a"})
	h.apply(&ForgetJobs{Fenced: h.fenced(), IDs: []string{"a"}})
	require.Len(t, h.s.forgotten, 1)
	h.now += 1000
	h.apply(&ForgetJobs{Fenced: h.fenced(), PruneBefore: h.now})
	require.Empty(t, h.s.forgotten)
	checkInvariants(t, h.s)
}

// A job accepted before the bound on its inputs' sources existed is in the
// log: replayed, it is still created (the bound is a submission's check,
// not the FSM's).
func TestAJobBeyondTheSourcesBoundStillApplies(t *testing.T) {
	spec := &jobspec.Spec{Vertices: []jobspec.Vertex{{ID: "a", Parallelism: 1100, Command: []string{"x"}}}}
	for i := 0; i < 999; i++ { // 999 x 1,100 = 1,098,900 sources
		spec.Vertices = append(spec.Vertices, jobspec.Vertex{ID: fmt.Sprintf("c%d", i), Parallelism: 1, Command: []string{"x"}, Inputs: []jobspec.Input{{From: "a"}}})
	}
	require.ErrorContains(t, jobspec.Check(spec), "1098900 sources", "a submission is refused")
	s := NewState()
	s.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m1"}))
	res := s.ApplyEntry(2, MustEncode(&SubmitJob{Fenced: Fenced{Token: s.Epoch(), Time: 1}, ID: "old", Spec: spec}))
	require.NoError(t, res[0].Err)
	require.True(t, s.HasJob("old"))
}
