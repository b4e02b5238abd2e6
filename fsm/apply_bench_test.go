package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"jobmaster/internal/densespec"
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// Apply benchmarks: the cost of applying commands on a follower or the
// leader, decode included, through FSM.ApplyBatch as Raft calls it. Each
// benchmark prepares b.N commands of one kind, packs them into entries of
// perEntry commands (the proposer's batching), and times applying them;
// ns/op is per command.
//
//	go test -run '^$' -bench BenchmarkApply ./fsm/

// applyBatchSizes are the commands per entry: one (no batching), and two
// batch sizes the proposer reaches under load.
var applyBatchSizes = []int{1, 32, 512}

// benchEntries packs encoded commands into Raft log entries of perEntry
// commands, numbered from first.
func benchEntries(frames [][]byte, perEntry int, first uint64) []*raft.Log {
	var logs []*raft.Log
	for i := 0; i < len(frames); i += perEntry {
		var data []byte
		for _, f := range frames[i:min(i+perEntry, len(frames))] {
			data = append(data, f...)
		}
		logs = append(logs, &raft.Log{Index: first + uint64(len(logs)), Type: raft.LogCommand, Data: data})
	}
	return logs
}

// applyTimed applies the entries to f, in calls of up to 64 entries (Raft
// hands the FSM what has committed, a few entries at a time), and fails the
// benchmark on a rejected command.
func applyTimed(b *testing.B, f *FSM, logs []*raft.Log) {
	b.Helper()
	for i := 0; i < len(logs); i += 64 {
		out := f.ApplyBatch(logs[i:min(i+64, len(logs))])
		for _, o := range out {
			for _, r := range o.([]Result) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		}
	}
}

func encodeFrame(b *testing.B, c Command) []byte {
	b.Helper()
	buf, err := Encode(nil, c)
	if err != nil {
		b.Fatal(err)
	}
	return buf
}

// newBenchFSM returns an FSM with an established leader, and the token.
func newBenchFSM(b *testing.B) (*FSM, uint64) {
	f := New()
	f.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: MustEncode(&EstablishLeadership{Node: "m1"})}})
	var tok uint64
	f.Read(func(s *State) { tok = s.Epoch() })
	return f, tok
}

const benchJob10 = `{"vertices":[{"id":"v","parallelism":10,"command":["/bin/true"]}]}`

// BenchmarkApply/submit: submit-job of a one-vertex job of 10 subtasks.
// BenchmarkApply/place: place-region of such a job onto 10 slots.
// BenchmarkApply/report: report-executions of those 10 executions RUNNING
// (the acknowledgment a deploy answer carries).
func BenchmarkApply(b *testing.B) {
	spec := parseSpec(b, benchJob10)
	for _, per := range applyBatchSizes {
		b.Run(fmt.Sprintf("submit/cmds-per-entry=%d", per), func(b *testing.B) {
			f, tok := newBenchFSM(b)
			frames := make([][]byte, b.N)
			for i := range frames {
				frames[i] = encodeFrame(b, &SubmitJob{Fenced: Fenced{Token: tok, Time: 1}, ID: fmt.Sprintf("job-%08d", i), Spec: spec})
			}
			logs := benchEntries(frames, per, 2)
			b.ResetTimer()
			applyTimed(b, f, logs)
		})
		for _, report := range []bool{false, true} {
			name := map[bool]string{false: "place", true: "report"}[report]
			b.Run(fmt.Sprintf("%s/cmds-per-entry=%d", name, per), func(b *testing.B) {
				f, frames := placedJobs(b, spec, b.N, report)
				logs := benchEntries(frames, per, nextIndex(f))
				b.ResetTimer()
				applyTimed(b, f, logs)
			})
		}
	}
}

// nextIndex is the log index of the next entry f applies.
func nextIndex(f *FSM) uint64 {
	var next uint64
	f.Read(func(s *State) { next = s.Index() + 1 })
	return next
}

// placedJobs submits n jobs of 10 subtasks. It returns the encoded
// place-region commands for them (one per job, each on its own executor of
// 10 slots) or, if report, applies those and returns the report-executions
// commands that mark each job's executions RUNNING.
func placedJobs(b *testing.B, spec *jobspec.Spec, n int, report bool) (*FSM, [][]byte) {
	b.Helper()
	f, tok := newBenchFSM(b)
	fenced := Fenced{Token: tok, Time: 1}
	var submits, places, reports [][]byte
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("job-%08d", i)
		ex := fmt.Sprintf("e%06d", i)
		submits = append(submits, encodeFrame(b, &SubmitJob{Fenced: fenced, ID: id, Spec: spec}))
		slots := make([]SlotAssign, 10)
		ups := make([]ReportUpdate, 10)
		for k := range slots {
			slots[k] = SlotAssign{Group: "default", Index: k, Executor: ex, Slot: k}
			ups[k] = ReportUpdate{ID: ExecutionID(id, "v", k, 0), State: wire.StateRunning}
		}
		places = append(places, encodeFrame(b, &PlaceRegion{Fenced: fenced, Job: id, Region: 0, Slots: slots}))
		if report {
			reports = append(reports, encodeFrame(b, &ReportExecutions{Fenced: fenced, Executor: ex, Updates: ups}))
		}
	}
	applyTimed(b, f, benchEntries(submits, 512, 2))
	if !report {
		return f, places
	}
	applyTimed(b, f, benchEntries(places, 512, nextIndex(f)))
	return f, reports
}

// BenchmarkEndWideJob cancels a running job of width subtasks and applies
// its executions' CANCELED reports, 100 per command (one executor's push):
// the work every master does when a wide job is cancelled or fails. One op
// is one job; us/exec is per ended execution.
//
//	go test -run '^$' -bench BenchmarkEndWideJob -benchtime 1x ./fsm/
func BenchmarkEndWideJob(b *testing.B) {
	const perExecutor = 100
	for _, width := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("width=%d", width), func(b *testing.B) {
			spec := parseSpec(b, fmt.Sprintf(`{"vertices":[{"id":"v","parallelism":%d,"command":["/bin/true"]}]}`, width))
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s := NewState()
				s.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m1"}))
				f := Fenced{Token: s.Epoch(), Time: 1}
				slots := make([]SlotAssign, width)
				for k := range slots {
					slots[k] = SlotAssign{Group: "default", Index: k, Executor: fmt.Sprintf("e%03d", k/perExecutor), Slot: k % perExecutor}
				}
				s.ApplyEntry(2, MustEncode(&SubmitJob{Fenced: f, ID: "wide", Spec: spec}))
				s.ApplyEntry(3, MustEncode(&PlaceRegion{Fenced: f, Job: "wide", Region: 0, Slots: slots}))
				var entries [][]byte
				for ex := 0; ex < width/perExecutor; ex++ {
					ups := make([]ReportUpdate, perExecutor)
					for k := range ups {
						ups[k] = ReportUpdate{ID: ExecutionID("wide", "v", ex*perExecutor+k, 0), State: wire.StateCanceled}
					}
					entries = append(entries, MustEncode(&ReportExecutions{Fenced: f, Executor: fmt.Sprintf("e%03d", ex), Updates: ups}))
				}
				b.StartTimer()
				s.ApplyEntry(4, MustEncode(&CancelJob{Fenced: f, ID: "wide"}))
				for k, data := range entries {
					s.ApplyEntry(uint64(5+k), data)
				}
				b.StopTimer()
				if v, _ := s.Job("wide"); v.Status != JobCanceled {
					b.Fatalf("job is %s", v.Status)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(width), "us/exec")
		})
	}
}

// BenchmarkPlaceWide applies the placement of one region of 10,000
// subtasks on 100 executors (the entry bytes as they arrive from the log):
// every master does this work, and the leader does it before it can
// deploy. us/exec is per placed execution.
//
//	go test -run '^$' -bench BenchmarkPlaceWide -benchmem ./fsm/
func BenchmarkPlaceWide(b *testing.B) {
	const width, perExecutor = 10_000, 100
	spec := parseSpec(b, fmt.Sprintf(`{"vertices":[{"id":"v","parallelism":%d,"command":["sim"]}]}`, width))
	slots := make([]SlotAssign, width)
	for k := range slots {
		slots[k] = SlotAssign{Group: "default", Index: k, Executor: fmt.Sprintf("sim%04d", k/perExecutor), Slot: k % perExecutor}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := NewState()
		s.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m1"}))
		f := Fenced{Token: s.Epoch(), Time: 1}
		s.ApplyEntry(2, MustEncode(&SubmitJob{Fenced: f, ID: "wide", Spec: spec}))
		place := MustEncode(&PlaceRegion{Fenced: f, Job: "wide", Region: 0, Slots: slots})
		b.StartTimer()
		rs := s.ApplyEntry(3, place)
		b.StopTimer()
		if len(rs) != 1 || rs[0].Err != nil || len(rs[0].Placed) != width {
			b.Fatalf("placement: %+v", rs[0].Err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/width, "us/exec")
}

// wideJob returns the entries' commands that bring job id, one vertex of
// wideWidth subtasks, to RUNNING on 100 executors (executor(k) is subtask
// k's): its submission, the placement of its region, and the executors'
// deploy answers, one report of 100 RUNNING executions each.
func wideJob(b *testing.B, fenced Fenced, id string, executor func(k int) string) (submit, place []byte, reports [][]byte) {
	spec := parseSpec(b, fmt.Sprintf(`{"vertices":[{"id":"v","parallelism":%d,"command":["sim"]}]}`, wideWidth))
	slots := make([]SlotAssign, wideWidth)
	for k := range slots {
		slots[k] = SlotAssign{Group: "default", Index: k, Executor: executor(k), Slot: k % widePerExecutor}
	}
	for ex := 0; ex < wideWidth/widePerExecutor; ex++ {
		ups := make([]ReportUpdate, widePerExecutor)
		for k := range ups {
			ups[k] = ReportUpdate{ID: ExecutionID(id, "v", ex*widePerExecutor+k, 0), State: wire.StateRunning}
		}
		reports = append(reports, encodeFrame(b, &ReportExecutions{Fenced: fenced, Executor: executor(ex * widePerExecutor), Updates: ups}))
	}
	return encodeFrame(b, &SubmitJob{Fenced: fenced, ID: id, Spec: spec}),
		encodeFrame(b, &PlaceRegion{Fenced: fenced, Job: id, Region: 0, Slots: slots}), reports
}

const wideWidth, widePerExecutor = 10_000, 100

// BenchmarkRunWide is what every master applies to bring a job of 10,000
// subtasks on 100 executors to RUNNING: the placement of its region, then
// the executors' deploy answers (100 reports of 100 executions RUNNING, in
// 10 entries of 10), through FSM.ApplyBatch with the event buffer kept as
// a master keeps it. Each op is one more job on the same FSM (on
// executors of its own), so the buffer is full after the fourth. us/exec
// is per execution.
//
//	go test -run '^$' -bench BenchmarkRunWide -benchmem ./fsm/
func BenchmarkRunWide(b *testing.B) {
	f, tok := newBenchFSM(b)
	fenced := Fenced{Token: tok, Time: 1}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		id := fmt.Sprintf("wide-%04d", i)
		submit, place, reports := wideJob(b, fenced, id, func(k int) string { return fmt.Sprintf("sim%04d-%04d", i, k/widePerExecutor) })
		applyTimed(b, f, benchEntries([][]byte{submit}, 1, nextIndex(f)))
		b.StartTimer()
		applyTimed(b, f, benchEntries([][]byte{place}, 1, nextIndex(f)))
		applyTimed(b, f, benchEntries(reports, 10, nextIndex(f)))
		b.StopTimer()
		f.Read(func(s *State) {
			if v, _ := s.Job(id); v.Status != JobRunning {
				b.Fatalf("job is %s", v.Status)
			}
		})
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/wideWidth, "us/exec")
}

// BenchmarkExpected is the leader's read of an executor's expected set at
// each of its full reports: 500 live executions there.
//
//	go test -run '^$' -bench BenchmarkExpected -benchmem ./fsm/
func BenchmarkExpected(b *testing.B) {
	const width = 500
	spec := parseSpec(b, fmt.Sprintf(`{"vertices":[{"id":"v","parallelism":%d,"command":["sim"]}]}`, width))
	s := NewState()
	s.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m1"}))
	f := Fenced{Token: s.Epoch(), Time: 1}
	slots := make([]SlotAssign, width)
	for k := range slots {
		slots[k] = SlotAssign{Group: "default", Index: k, Executor: "sim0000", Slot: k}
	}
	s.ApplyEntry(2, MustEncode(&SubmitJob{Fenced: f, ID: "wide", Spec: spec}))
	s.ApplyEntry(3, MustEncode(&PlaceRegion{Fenced: f, Job: "wide", Region: 0, Slots: slots}))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := s.Expected("sim0000"); len(got) != width || got[0].ID > got[1].ID {
			b.Fatalf("expected set of %d", len(got))
		}
	}
}

// BenchmarkEventsRead reads 1,000 events from the oldest held in a full
// buffer (65,536 events of wide jobs placed and answered), as a reader of
// the event stream that resumes from an old cursor does, under the FSM's
// read lock: unfiltered, by topic, and by a job that has none of them.
//
//	go test -run '^$' -bench BenchmarkEventsRead -benchmem ./fsm/
func BenchmarkEventsRead(b *testing.B) {
	f, tok := newBenchFSM(b)
	fenced := Fenced{Token: tok, Time: 1}
	for i := 0; i < 4; i++ {
		submit, place, reports := wideJob(b, fenced, fmt.Sprintf("wide-%d", i), func(k int) string { return fmt.Sprintf("sim%d-%04d", i, k/widePerExecutor) })
		applyTimed(b, f, benchEntries([][]byte{submit, place}, 1, nextIndex(f)))
		applyTimed(b, f, benchEntries(reports, 1, nextIndex(f)))
	}
	oldest, held := f.OldestEvents()
	if held != DefaultEventBuffer && held < DefaultEventBuffer-wideWidth {
		b.Fatalf("%d events held", held)
	}
	for _, c := range []struct {
		name   string
		filter *EventFilter
	}{
		{"all", nil},
		{"topic=job", &EventFilter{Topics: map[Topic]bool{TopicJob: true}}},
		{"job=none", &EventFilter{Job: "none"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Events(AllOf(oldest), c.filter, 1000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWideRestart is a restart of a job of two vertices of 10,000
// subtasks joined all-to-all (gen -> sum, blocking; gen on e1, sum on e2,
// every sum subtask running): a sum subtask failing (its region restarts
// and looks for inputs no executor holds), and e1 lost with gen's 10,000
// partitions, which every sum has read. Each is one command every master
// applies; a cost in the square of the width would stall the log.
//
//	go test -run '^$' -bench BenchmarkWideRestart ./fsm/
func BenchmarkWideRestart(b *testing.B) {
	const width = 10000
	spec := parseSpec(b, fmt.Sprintf(`{"vertices":[{"id":"gen","parallelism":%d,"command":["x"],"slot_sharing_group":"g"},
		{"id":"sum","parallelism":%d,"command":["x"],"slot_sharing_group":"s","inputs":[{"from":"gen","mode":"blocking"}]}],
		"restart":{"strategy":"fixed-delay","attempts":5,"delay":"1s"}}`, width, width))
	setup := func() (*State, Fenced) {
		s := NewState()
		s.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m1"}))
		f := Fenced{Token: s.Epoch(), Time: 1}
		s.ApplyEntry(2, MustEncode(&SubmitJob{Fenced: f, ID: "w", Spec: spec}))
		for region, ex := range []string{"e1", "e2"} {
			slots := make([]SlotAssign, width)
			for k := range slots {
				slots[k] = SlotAssign{Group: spec.Vertices[region].SlotSharingGroup, Index: k, Executor: ex, Slot: k}
			}
			s.ApplyEntry(s.Index()+1, MustEncode(&PlaceRegion{Fenced: f, Job: "w", Region: region, Slots: slots}))
			ups := make([]ReportUpdate, width)
			st := wire.StateFinished
			if region == 1 {
				st = wire.StateRunning
			}
			for k := range ups {
				ups[k] = ReportUpdate{ID: ExecutionID("w", spec.Vertices[region].ID, k, 0), State: st}
			}
			s.ApplyEntry(s.Index()+1, MustEncode(&ReportExecutions{Fenced: f, Executor: ex, Updates: ups}))
		}
		if v, _ := s.Job("w"); v.Status != JobRunning || s.NumPartitions() != width {
			b.Fatalf("job %s with %d partitions", v.Status, s.NumPartitions())
		}
		return s, f
	}
	for _, c := range []struct {
		name string
		cmd  func(f Fenced) Command
	}{
		{"a-consumer-fails", func(f Fenced) Command {
			return &ReportExecutions{Fenced: f, Executor: "e2", Updates: []ReportUpdate{{ID: "w/sum/5/0", State: wire.StateFailed, Message: "exit status 1"}}}
		}},
		{"read-partitions-lost", func(f Fenced) Command { return &ExecutorLost{Fenced: f, Executor: "e1"} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s, f := setup()
				entry := MustEncode(c.cmd(f))
				b.StartTimer()
				s.ApplyEntry(s.Index()+1, entry)
			}
		})
	}
}

// BenchmarkDeepRestart is a restart that runs again a chain of 1,000
// regions: s0 -> s1 -> ... -> s999, blocking, each stage's output released
// once the next finished. s998's output is lost after s999 read it (no
// restart), then s999 fails: its restart runs the whole chain again, each
// stage for the next. A cost in the square of the depth would stall every
// master's log (11.8 s on 2026-12-07 before it was fixed).
//
//	go test -run '^$' -bench BenchmarkDeepRestart ./fsm/
func BenchmarkDeepRestart(b *testing.B) {
	const depth = 1000
	var sb strings.Builder
	sb.WriteString(`{"vertices":[`)
	for i := 0; i < depth; i++ {
		if i > 0 {
			fmt.Fprintf(&sb, `,{"id":"s%d","parallelism":1,"command":["x"],"inputs":[{"from":"s%d","mode":"blocking"}]}`, i, i-1)
		} else {
			sb.WriteString(`{"id":"s0","parallelism":1,"command":["x"]}`)
		}
	}
	sb.WriteString(`],"restart":{"strategy":"fixed-delay","attempts":5,"delay":"1s"}}`)
	spec := parseSpec(b, sb.String())
	setup := func() (*State, Fenced) {
		s := NewState()
		s.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m1"}))
		f := Fenced{Token: s.Epoch(), Time: 1}
		s.ApplyEntry(2, MustEncode(&SubmitJob{Fenced: f, ID: "d", Spec: spec}))
		for r := 0; r < depth; r++ {
			ex, st := "e1", wire.StateFinished
			if r == depth-2 {
				ex = "e2"
			}
			if r == depth-1 {
				st = wire.StateRunning
			}
			s.ApplyEntry(s.Index()+1, MustEncode(&PlaceRegion{Fenced: f, Job: "d", Region: r, Slots: []SlotAssign{{Group: "default", Index: 0, Executor: ex, Slot: r % 2}}}))
			s.ApplyEntry(s.Index()+1, MustEncode(&ReportExecutions{Fenced: f, Executor: ex, Updates: []ReportUpdate{{ID: ExecutionID("d", fmt.Sprintf("s%d", r), 0, 0), State: st}}}))
		}
		s.ApplyEntry(s.Index()+1, MustEncode(&ExecutorLost{Fenced: f, Executor: "e2"}))
		if v, _ := s.Job("d"); v.Status != JobRunning || s.NumPartitions() != 0 {
			b.Fatalf("job %s with %d partitions", v.Status, s.NumPartitions())
		}
		return s, f
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, f := setup()
		entry := MustEncode(&ReportExecutions{Fenced: f, Executor: "e1", Updates: []ReportUpdate{{ID: ExecutionID("d", fmt.Sprintf("s%d", depth-1), 0, 0), State: wire.StateFailed}}})
		b.StartTimer()
		s.ApplyEntry(s.Index()+1, entry)
		b.StopTimer()
		if v, _ := s.Job("d"); v.Status != JobRestarting {
			b.Fatalf("job %s", v.Status)
		}
	}
}

// BenchmarkRedeployDense: the deployments of every task of a dense job
// (1,000 vertices of 10 subtasks, each reading the 57 vertices before it:
// 55,347 edges, one pipelined region), built as a redeploy of all of them
// does: per execution id, each vertex's edges once per call.
func BenchmarkRedeployDense(b *testing.B) {
	const vertices, width, fanIn = 1000, 10, 57
	spec := parseSpec(b, densespec.JSON(vertices, width, fanIn))
	s := NewState()
	s.ApplyEntry(1, MustEncode(&EstablishLeadership{Node: "m1"}))
	f := Fenced{Token: s.Epoch(), Time: 1}
	s.ApplyEntry(2, MustEncode(&SubmitJob{Fenced: f, ID: "d", Spec: spec}))
	rr := s.ReadyRegions()
	if len(rr) != 1 {
		b.Fatalf("%d ready regions", len(rr))
	}
	slots := make([]SlotAssign, len(rr[0].Keys))
	for k, key := range rr[0].Keys {
		slots[k] = SlotAssign{Group: key.Group, Index: key.Index, Executor: "e1", Slot: k}
	}
	res := s.ApplyEntry(s.Index()+1, MustEncode(&PlaceRegion{Fenced: f, Job: "d", Region: 0, Slots: slots}))
	ids := make([]string, 0, vertices*width)
	for _, e := range res[0].Placed {
		ids = append(ids, e.ID)
	}
	if len(ids) != vertices*width {
		b.Fatalf("%d placed", len(ids))
	}
	b.ResetTimer()
	for range b.N {
		n := 0
		s.EachTaskSpecOf(ids, func(ts *TaskSpec) { n += len(ts.Inputs) })
		if n == 0 {
			b.Fatal("no inputs")
		}
	}
}
