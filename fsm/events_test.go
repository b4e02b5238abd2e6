package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"jobmaster/wire"
)

// eventLine renders an event compactly for comparisons.
func eventLine(e Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d.%d %s", e.Index, e.Offset, e.Type)
	for _, kv := range [][2]string{{"job", e.Job}, {"exec", e.Execution}, {"executor", e.Executor}, {"state", e.State},
		{"prev", e.Previous}, {"msg", e.Message}, {"reason", e.Reason}, {"node", e.Node}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
		}
	}
	if e.Token != 0 {
		fmt.Fprintf(&b, " token=%d", e.Token)
	}
	return b.String()
}

func recordingHarness(t *testing.T) *harness {
	h := &harness{t: t, s: NewState(), now: 1_000_000}
	h.s.RecordEvents()
	h.establish("m1")
	return h
}

func (h *harness) takeLines() []string {
	var out []string
	for _, e := range h.s.TakeEvents() {
		out = append(out, eventLine(e))
	}
	return out
}

func TestEventsOfAFailureAndItsRestart(t *testing.T) {
	h := recordingHarness(t)
	require.Equal(t, []string{"1.0 leader-established node=m1 token=1"}, h.takeLines())

	h.submit("j", `{"vertices":[{"id":"v","parallelism":2,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":1,"delay":"0s"}}`)
	require.Equal(t, []string{"2.0 job-status job=j state=CREATED"}, h.takeLines())

	h.placeAll("e1")
	require.Equal(t, []string{
		"3.0 execution-state job=j exec=j/v/0/0 executor=e1 state=DEPLOYING prev=SCHEDULED",
		"3.1 execution-state job=j exec=j/v/1/0 executor=e1 state=DEPLOYING prev=SCHEDULED",
		"3.2 job-status job=j state=RUNNING prev=CREATED",
	}, h.takeLines())

	// Two commands in one entry: their events share the index, and the
	// offsets go on.
	rs := h.s.ApplyEntry(4, MustEncode(
		&ReportExecutions{Fenced: h.fenced(), Executor: "e1", Updates: []ReportUpdate{{ID: "j/v/0/0", State: wire.StateRunning}}},
		&ReportExecutions{Fenced: h.fenced(), Executor: "e1", Updates: []ReportUpdate{{ID: "j/v/1/0", State: wire.StateFailed, Message: "command not found: x"}}},
	))
	require.Len(t, rs, 2)
	require.Len(t, rs[0].Events(), 1, "each result carries its own command's events")
	require.Equal(t, []string{
		"4.0 execution-state job=j exec=j/v/0/0 executor=e1 state=RUNNING prev=DEPLOYING",
		"4.1 execution-state job=j exec=j/v/1/0 executor=e1 state=FAILED prev=DEPLOYING msg=command not found: x",
		"4.2 job-restart job=j msg=j/v/1/0 FAILED: command not found: x reason=task_failed",
		"4.3 execution-state job=j exec=j/v/0/0 executor=e1 state=CANCELING prev=RUNNING",
		"4.4 job-status job=j state=RESTARTING prev=RUNNING msg=j/v/1/0 FAILED: command not found: x",
	}, h.takeLines())
	require.Equal(t, "j/v/1/0", rs[1].Events()[0].Execution)

	h.report("e1", ReportUpdate{ID: "j/v/0/0", State: wire.StateCanceled, Message: "canceled by the leader"})
	h.takeLines()
	require.NoError(t, h.apply(&RestartRegions{Fenced: h.fenced(), Job: "j"}).Err)
	require.Equal(t, []string{
		"6.0 execution-state job=j exec=j/v/0/1 state=SCHEDULED",
		"6.1 execution-state job=j exec=j/v/1/1 state=SCHEDULED",
		"6.2 job-status job=j state=RUNNING prev=RESTARTING msg=j/v/1/0 FAILED: command not found: x",
	}, h.takeLines())
	// The job remembers how each replaced attempt ended, through a
	// snapshot too.
	prev := h.job("j").Vertices[0].Previous
	require.Len(t, prev, 2)
	require.Equal(t, PreviousAttempt{Attempt: 0, State: wire.StateFailed, Message: "command not found: x", EndTime: h.now, Executor: "e1"}, prev[1])
	require.Equal(t, wire.StateCanceled, prev[0].State)
	var snap bytes.Buffer
	_, err := h.s.Capture().WriteTo(&snap)
	require.NoError(t, err)
	restored, err := Restore(&snap)
	require.NoError(t, err)
	rv, _ := restored.Job("j")
	require.Equal(t, prev, rv.Vertices[0].Previous)

	// The second failure is one more than the strategy allows.
	h.placeAll("e1")
	h.takeLines()
	require.NoError(t, h.apply(&FailExecutions{Fenced: h.fenced(), Executor: "e1", IDs: []string{"j/v/0/1", "j/v/1/1"}, Reason: "deployment to executor e1 not acknowledged within 10s"}).Err)
	lines := h.takeLines()
	require.Contains(t, lines[len(lines)-1], "job-status job=j state=FAILED prev=RUNNING")
	require.NoError(t, h.apply(&ForgetJobs{Fenced: h.fenced(), IDs: []string{"j"}}).Err)
	require.Equal(t, []string{"9.0 job-forgotten job=j state=FAILED"}, h.takeLines())
}

func TestRestartReasons(t *testing.T) {
	spec := `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":5,"delay":"0s"}}`
	reason := func(h *harness) string {
		for _, e := range h.s.TakeEvents() {
			if e.Type == EventJobRestart {
				return e.Reason
			}
		}
		return ""
	}
	for _, c := range []struct {
		name string
		do   func(h *harness)
		want string
	}{
		{"failed", func(h *harness) {
			h.report("e1", ReportUpdate{ID: "j/v/0/0", State: wire.StateFailed, Message: "exit status 1"})
		}, ReasonTaskFailed},
		{"canceled by the lease", func(h *harness) {
			h.report("e1", ReportUpdate{ID: "j/v/0/0", State: wire.StateCanceled, Message: "lease expired"})
		}, ReasonTaskCanceled},
		{"missing", func(h *harness) {
			h.reportAll("e1", wire.StateRunning)
			h.apply(&FailExecutions{Fenced: h.fenced(), Executor: "e1", IDs: []string{"j/v/0/0"}, Reason: "missing on executor e1"})
		}, ReasonMissing},
		{"expired", func(h *harness) {
			h.apply(&FailExecutions{Fenced: h.fenced(), Executor: "e1", IDs: []string{"j/v/0/0"}, Reason: "not acknowledged"})
		}, ReasonDeployExpired},
		{"executor lost", func(h *harness) {
			h.apply(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})
		}, ReasonExecutorLost},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := recordingHarness(t)
			h.submit("j", spec)
			h.placeAll("e1")
			h.s.TakeEvents()
			c.do(h)
			require.Equal(t, c.want, reason(h))
		})
	}
}

func TestAStateWithoutARecorderRecordsNothing(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`)
	r := h.apply(&CancelJob{Fenced: h.fenced(), ID: "j"})
	require.Empty(t, r.Events())
	require.Empty(t, h.s.TakeEvents())
}

// logOf is a log of entries that exercises every event type.
func logOf(t *testing.T) []*raft.Log {
	h := newHarness(t) // builds valid commands; its own state is a scratch copy
	var logs []*raft.Log
	add := func(cmds ...Command) {
		idx := uint64(len(logs) + 1)
		data := MustEncode(cmds...)
		logs = append(logs, &raft.Log{Index: idx, Type: raft.LogCommand, Data: data})
		h.s.ApplyEntry(idx, data)
	}
	logs = append(logs[:0], &raft.Log{Index: 1, Type: raft.LogCommand, Data: MustEncode(&EstablishLeadership{Node: "m1"})})
	for i := range 6 {
		id := fmt.Sprintf("j%d", i)
		add(&SubmitJob{Fenced: h.fenced(), ID: id, Spec: parseSpec(t, `{"vertices":[{"id":"v","parallelism":3,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":1,"delay":"0s"}}`)})
		for _, rr := range h.s.ReadyRegions() {
			var slots []SlotAssign
			for k, need := range rr.Keys {
				slots = append(slots, SlotAssign{Group: need.Group, Index: need.Index, Executor: "e1", Slot: 3*i + k})
			}
			add(&PlaceRegion{Fenced: h.fenced(), Job: rr.Job, Region: rr.Region, Slots: slots})
		}
		add(&ReportExecutions{Fenced: h.fenced(), Executor: "e1", Updates: []ReportUpdate{
			{ID: id + "/v/0/0", State: wire.StateRunning}, {ID: id + "/v/1/0", State: wire.StateFailed, Message: "boom"}}},
			&CancelJob{Fenced: h.fenced(), ID: id})
	}
	add(&ExecutorLost{Fenced: h.fenced(), Executor: "e1"})
	logs = append(logs, &raft.Log{Index: uint64(len(logs) + 1), Type: raft.LogConfiguration})
	return logs
}

func readAll(t *testing.T, f *FSM, c Cursor, filter *EventFilter) []string {
	t.Helper()
	var out []string
	for {
		r, err := f.Events(c, filter, 4)
		require.NoError(t, err)
		for _, e := range r.Events {
			out = append(out, eventLine(e))
		}
		if r.Next == c {
			return out
		}
		c = r.Next
	}
}

func TestEveryReplicaDerivesTheSameEvents(t *testing.T) {
	logs := logOf(t)
	a, b := New(), New()
	a.ApplyBatch(logs)
	for _, l := range logs { // another pace: one entry at a time
		b.Apply(l)
	}
	all := readAll(t, a, AllOf(0), nil)
	require.Greater(t, len(all), 40)
	require.Equal(t, all, readAll(t, b, AllOf(0), nil))

	// Resuming anywhere, at an entry's end or inside it, repeats and skips
	// nothing.
	for k := range all {
		var idx uint64
		var off int
		_, err := fmt.Sscanf(all[k], "%d.%d", &idx, &off)
		require.NoError(t, err)
		require.Equal(t, strings.Join(all[k+1:], "\n"), strings.Join(readAll(t, b, Cursor{Index: idx, Offset: off}, nil), "\n"), "after %s", all[k])
	}
	// A filter keeps the order and the places.
	var execs []string
	for _, l := range all {
		if strings.Contains(l, "execution-state") {
			execs = append(execs, l)
		}
	}
	require.Equal(t, execs, readAll(t, a, AllOf(0), &EventFilter{Topics: map[Topic]bool{TopicExecution: true}}))
	// So does a job's, of execution events and others alike.
	var ofJob []string
	for _, l := range all {
		if strings.Contains(l, " job=j2 ") || strings.HasSuffix(l, " job=j2") {
			ofJob = append(ofJob, l)
		}
	}
	require.NotEmpty(t, ofJob)
	require.Less(t, len(ofJob), len(all))
	require.Equal(t, ofJob, readAll(t, a, AllOf(0), &EventFilter{Job: "j2"}))
}

func TestTheEventBufferIsBoundedAndSaysWhatIsGone(t *testing.T) {
	logs := logOf(t)
	f := NewWithEvents(10)
	f.ApplyBatch(logs)
	oldest, held := f.OldestEvents()
	require.Greater(t, oldest, uint64(0))
	if held > 10 {
		require.Len(t, f.events.entries[f.events.head:], 1, "beyond the bound only when the newest entry alone is larger")
	}

	all := readAll(t, New(), AllOf(0), nil) // an empty FSM has nothing
	require.Empty(t, all)
	_, err := f.Events(AllOf(oldest-1), nil, 100)
	var gone *EventsGoneError
	require.True(t, errors.As(err, &gone))
	require.ErrorIs(t, err, ErrEventsGone)
	require.Equal(t, oldest, gone.Oldest)
	_, err = f.Events(Cursor{Index: oldest, Offset: 0}, nil, 100)
	require.ErrorIs(t, err, ErrEventsGone, "inside an entry no longer held")
	_, err = f.Events(AllOf(oldest), nil, 100)
	require.NoError(t, err)
}

func TestARestoreStartsTheEventsAfresh(t *testing.T) {
	logs := logOf(t)
	src := New()
	src.ApplyBatch(logs[:10])
	var snap bytes.Buffer
	_, err := src.Capture().WriteTo(&snap)
	require.NoError(t, err)

	f := New()
	f.ApplyBatch(logs[:3])
	require.NoError(t, f.Restore(readCloser{&snap}))
	oldest, held := f.OldestEvents()
	require.Equal(t, uint64(10), oldest)
	require.Zero(t, held)
	_, err = f.Events(AllOf(5), nil, 10)
	require.ErrorIs(t, err, ErrEventsGone)
	f.ApplyBatch(logs[10:])
	full := New()
	full.ApplyBatch(logs)
	require.Equal(t, readAll(t, full, AllOf(10), nil), readAll(t, f, AllOf(10), nil))
}

func TestACursorAheadOfTheStateWaits(t *testing.T) {
	f := New()
	f.ApplyBatch(logOf(t)[:3])
	r, err := f.Events(AllOf(7), nil, 10)
	require.NoError(t, err)
	require.Empty(t, r.Events)
	require.Equal(t, AllOf(7), r.Next)
}

type readCloser struct{ *bytes.Buffer }

func (readCloser) Close() error { return nil }

// An execution-state event points at its execution, which later commands
// change: what a reader gets from the buffer long after an entry applied
// must be what it got right after, field for field.
func TestPropertyEventsReadLaterReadAsTheyWere(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := New()
		var token uint64
		now := int64(1_000_000)
		var seen []Event
		for i, n := uint64(1), rapid.IntRange(1, 200).Draw(t, "entries"); i <= uint64(n); i++ {
			var c Command
			f.Read(func(s *State) { c = genCommand(t, s, &token, &now) })
			out := f.ApplyBatch([]*raft.Log{{Index: i, Type: raft.LogCommand, Data: MustEncode(c)}})
			for _, r := range out[0].([]Result) {
				if r.Epoch != 0 {
					token = r.Epoch
				}
			}
			read, err := f.Events(AllOf(i-1), nil, 1<<20)
			require.NoError(t, err)
			require.Equal(t, out[0].([]Result)[0].Events(), nilIfEmpty(read.Events), "the result's events are the buffer's")
			seen = append(seen, read.Events...)
		}
		read, err := f.Events(AllOf(0), nil, 1<<20)
		require.NoError(t, err)
		require.Equal(t, nilIfEmpty(seen), nilIfEmpty(read.Events))
	})
}

func nilIfEmpty(evs []Event) []Event {
	if len(evs) == 0 {
		return nil
	}
	return evs
}

// A record stays small: the buffer holds DefaultEventBuffer of them on
// every master.
func TestARecordIsSmall(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(record{}), uintptr(56))
}

// A Result travels from Raft's FSM goroutine to the leader's, which reads
// its events while later entries apply. The events of a restart's new
// attempts (SCHEDULED) are read here while the next placement sets their
// executor: a record of SCHEDULED must not read it (go test -race).
func TestResultEventsReadWhileLaterEntriesApply(t *testing.T) {
	const width, executors = 200, 5
	spec := parseSpec(t, fmt.Sprintf(`{"vertices":[{"id":"v","parallelism":%d,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":1000,"delay":"0s"}}`, width))
	f := New()
	var idx uint64
	apply := func(c Command) Result {
		idx++
		r := f.ApplyBatch([]*raft.Log{{Index: idx, Type: raft.LogCommand, Data: MustEncode(c)}})[0].([]Result)[0]
		require.NoError(t, r.Err)
		return r
	}
	tok := apply(&EstablishLeadership{Node: "m1"}).Epoch
	now := int64(1000)
	fenced := func() Fenced { now++; return Fenced{Token: tok, Time: now} }
	apply(&SubmitJob{Fenced: fenced(), ID: "j", Spec: spec})

	results := make(chan Result, 64)
	bad := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r := range results {
			for _, e := range r.Events() {
				if e.State == string(wire.StateScheduled) && e.Executor != "" {
					select {
					case bad <- fmt.Sprintf("%s is SCHEDULED on %s", e.Execution, e.Executor):
					default:
					}
				}
			}
		}
	}()
	for round := 0; round < 20; round++ {
		executor := func(k int) string { return fmt.Sprintf("e%d-%d", round, k%executors) }
		slots := make([]SlotAssign, width)
		for k := range slots {
			slots[k] = SlotAssign{Group: "default", Index: k, Executor: executor(k), Slot: k / executors}
		}
		results <- apply(&PlaceRegion{Fenced: fenced(), Job: "j", Region: 0, Slots: slots})
		// Subtask 0 fails: the region's others are cancelled, then it
		// restarts with new attempts, SCHEDULED.
		results <- apply(&ReportExecutions{Fenced: fenced(), Executor: executor(0),
			Updates: []ReportUpdate{{ID: ExecutionID("j", "v", 0, round), State: wire.StateFailed}}})
		for ex := 0; ex < executors; ex++ {
			var ups []ReportUpdate
			for k := ex; k < width; k += executors {
				if k != 0 {
					ups = append(ups, ReportUpdate{ID: ExecutionID("j", "v", k, round), State: wire.StateCanceled})
				}
			}
			results <- apply(&ReportExecutions{Fenced: fenced(), Executor: executor(ex), Updates: ups})
		}
		r := apply(&RestartRegions{Fenced: fenced(), Job: "j"})
		require.NotEmpty(t, r.Events(), "the restart made new attempts")
		results <- r
	}
	close(results)
	<-done
	select {
	case msg := <-bad:
		t.Fatal(msg)
	default:
	}
}

// A restore that takes a master's state back (an operator restores a
// backup older than what it had applied) tells every reader that had seen
// past the backup that what it saw is gone; readers are told the state
// stands just past what they had seen, and resume from there with the
// entries that follow the restore. Without it, a stream went on silently
// and a follower of a job that the backup did not hold waited forever.
func TestARestoreBackInTimeSendsEveryReaderBack(t *testing.T) {
	logs := logOf(t)
	require.Greater(t, len(logs), 20)
	src := New()
	src.ApplyBatch(logs[:5])
	var snap bytes.Buffer
	_, err := src.Capture().WriteTo(&snap)
	require.NoError(t, err)

	f := New()
	f.ApplyBatch(logs[:20])
	at := uint64(20)
	require.NoError(t, f.Restore(readCloser{&snap}))
	_, err = f.Events(AllOf(at), nil, 10)
	gone, ok := errors.AsType[*EventsGoneError](err)
	require.True(t, ok, "a reader that had seen index %d read on: %v", at, err)
	require.Equal(t, at+1, gone.Oldest)
	var told uint64
	f.Read(func(st *State) { told = f.IndexOf(st) })
	require.Equal(t, at+1, told, "readers of the restored state are told its index")
	r, err := f.Events(AllOf(told), nil, 10)
	require.NoError(t, err, "a reader resuming where the state stands")
	require.Empty(t, r.Events)
	require.Equal(t, AllOf(told), r.Next)

	// The entries after the restore come after it, and reach that reader.
	next := &raft.Log{Index: at + 2, Type: raft.LogCommand, Data: MustEncode(&EstablishLeadership{Node: "m2"})}
	f.ApplyBatch([]*raft.Log{next})
	r, err = f.Events(AllOf(told), nil, 10)
	require.NoError(t, err)
	require.NotEmpty(t, r.Events, "the entry after the restore")
	f.Read(func(st *State) { told = f.IndexOf(st) })
	require.Equal(t, at+2, told)
}
