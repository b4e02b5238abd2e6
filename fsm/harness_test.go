package fsm

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/jobspec"
	"jobmaster/wire"
)

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	require.TestingT
	Helper()
}

// harness applies commands to a State the way the log would: each command
// goes through the encoder and decoder and gets the next index.
type harness struct {
	t     testing.TB
	s     *State
	token uint64
	now   int64
}

func newHarness(t testing.TB) *harness {
	h := &harness{t: t, s: NewState(), now: 1_000_000}
	h.establish("m1")
	return h
}

func (h *harness) apply(c Command) Result {
	h.t.Helper()
	rs := h.s.ApplyEntry(h.s.Index()+1, MustEncode(c))
	require.Len(h.t, rs, 1)
	return rs[0]
}

func (h *harness) establish(node string) {
	r := h.apply(&EstablishLeadership{Node: node})
	require.NoError(h.t, r.Err)
	h.token = r.Epoch
}

func (h *harness) fenced() Fenced { return Fenced{Token: h.token, Time: h.now} }

func parseSpec(t tb, body string) *jobspec.Spec {
	t.Helper()
	s, err := jobspec.Parse([]byte(body))
	require.NoError(t, err)
	return s
}

func (h *harness) submit(id, body string) Result {
	h.t.Helper()
	return h.apply(&SubmitJob{Fenced: h.fenced(), ID: id, Spec: parseSpec(h.t, body)})
}

// placeAll places every ready region, filling slots of the executor in
// order; it returns the placed executions.
func (h *harness) placeAll(executor string) []Execution {
	h.t.Helper()
	var placed []Execution
	for {
		ready := h.s.ReadyRegions()
		if len(ready) == 0 {
			return placed
		}
		placed = append(placed, h.place(ready[0], executor)...)
	}
}

// place places the ready region rr on executor, fresh slots in order.
func (h *harness) place(rr ReadyRegion, executor string) []Execution {
	h.t.Helper()
	used := map[int]bool{}
	for _, n := range h.s.UsedSlots()[executor] {
		used[n] = true
	}
	next := 0
	var slots []SlotAssign
	for _, k := range rr.Keys {
		if k.Held {
			slots = append(slots, SlotAssign{Group: k.Group, Index: k.Index, Executor: k.Executor, Slot: k.Slot})
			continue
		}
		for used[next] {
			next++
		}
		used[next] = true
		slots = append(slots, SlotAssign{Group: k.Group, Index: k.Index, Executor: executor, Slot: next})
	}
	r := h.apply(&PlaceRegion{Fenced: h.fenced(), Job: rr.Job, Region: rr.Region, Slots: slots})
	require.NoError(h.t, r.Err)
	return r.Placed
}

func (h *harness) report(executor string, updates ...ReportUpdate) Result {
	h.t.Helper()
	r := h.apply(&ReportExecutions{Fenced: h.fenced(), Executor: executor, Updates: updates})
	require.NoError(h.t, r.Err)
	return r
}

// reportAll reports every live execution on the executor in the given state.
func (h *harness) reportAll(executor string, st wire.State) {
	h.t.Helper()
	var ups []ReportUpdate
	for _, e := range h.s.Expected(executor) {
		ups = append(ups, ReportUpdate{ID: e.ID, State: st})
	}
	h.report(executor, ups...)
}

func (h *harness) job(id string) *JobView {
	h.t.Helper()
	v, ok := h.s.Job(id)
	require.True(h.t, ok, "job %s", id)
	return v
}

func (h *harness) exec(id string) Execution {
	h.t.Helper()
	e, ok := h.s.Execution(id)
	require.True(h.t, ok, "execution %s", id)
	return e
}

// checkInvariants verifies what must hold after every command.
func checkInvariants(t tb, s *State) {
	t.Helper()
	// A scheduling pass with free new slots sees every ready region that
	// needs no more than that, up to the regions that surely take them
	// all: ReadyRegionsWithin leaves out, before that cut, only regions
	// that need more, and lists in the ready queue's order.
	all := s.ReadyRegions()
	for i := 1; i < len(all); i++ {
		a, b := readyItem{regionRef{all[i-1].Job, all[i-1].Region}, all[i-1].SubmitIndex}, readyItem{regionRef{all[i].Job, all[i].Region}, all[i].SubmitIndex}
		require.Negative(t, a.compare(b), "ready regions in order")
	}
	for _, free := range []int{0, 1, 2, 3, 5} {
		ready, tooBig := s.ReadyRegionsWithin(free)
		listed, inReady := map[regionRef]bool{}, map[regionRef]bool{}
		for _, r := range ready {
			listed[regionRef{r.Job, r.Region}] = true
			inReady[regionRef{r.Job, r.Region}] = true
		}
		for _, r := range tooBig {
			listed[regionRef{r.Job, r.Region}] = true
		}
		sure, jobs := 0, map[string]*surely{}
		for _, r := range all {
			ref := regionRef{r.Job, r.Region}
			l := jobs[r.Job]
			if free > 0 && sure >= free && l == nil {
				sharesHeld := s.slotOf[r.Job] != nil && s.leastNewSlots(ref) == 0
				require.Equal(t, sharesHeld, inReady[ref], "region %s/%d comes after regions that surely take the %d free slots: listed only if it needs no new slot of a job that holds some", r.Job, r.Region, free)
				continue
			}
			need := 0
			for _, k := range r.Keys {
				if !k.Held {
					need++
				}
			}
			if need <= free && (l != nil || need <= free-sure) {
				require.True(t, listed[ref], "region %s/%d needs %d new slots, %d are free (%d surely taken before it), and is left out", r.Job, r.Region, need, free, sure)
			}
			if !inReady[ref] {
				continue
			}
			if l == nil {
				l = &surely{all: true}
				jobs[r.Job] = l
			}
			sure += l.takes(&r, free-sure)
		}
	}
	// A region is ready only once every region it reads has finished: it
	// would be placed reading outputs that are not there.
	for _, id := range sortedKeys(s.jobs) {
		j := s.jobs[id]
		for ri, rs := range j.Regions {
			if rs.Status != RegionReady {
				continue
			}
			for _, u := range rs.Upstream {
				require.Equal(t, RegionFinished, j.Regions[u].Status, "job %s: region %d is ready, and region %d it reads is %s", id, ri, u, j.Regions[u].Status)
			}
		}
	}
	// What may still start reads inputs that are there: every subtask of a
	// ready region, and every one of a running region not started yet
	// (a task starts once it has fetched its blocking inputs), has the
	// output of each producer subtask it reads in another region tracked.
	for _, id := range sortedKeys(s.jobs) {
		j := s.jobs[id]
		if j.Status.Terminal() || j.Status.ending() {
			continue
		}
		for vi := range j.Vertices {
			ri := j.Vertices[vi].Region
			st := j.Regions[ri].Status
			if st != RegionReady && st != RegionRunning {
				continue
			}
			for i, e := range s.current[id][vi] {
				if st == RegionRunning && (e == nil || (e.State != wire.StateScheduled && e.State != wire.StateDeploying)) {
					continue
				}
				for _, in := range j.Spec.Vertices[vi].Inputs {
					pv := j.Spec.VertexIndex(in.From)
					if j.Vertices[pv].Region == ri {
						continue
					}
					from, to := 0, len(s.current[id][pv])
					if in.Forward() {
						from, to = i, i+1
					}
					for ps := from; ps < to; ps++ {
						pe := s.current[id][pv][ps]
						require.NotNil(t, pe, "job %s: %s/%d reads %s/%d, which has no attempt", id, j.Spec.Vertices[vi].ID, i, in.From, ps)
						require.NotNil(t, s.partitions[pe.ID], "job %s: %s/%d (region %s) may start and reads %s, whose output is not tracked", id, j.Spec.Vertices[vi].ID, i, st, pe.ID)
					}
				}
			}
		}
	}
	// The derived indexes equal a rebuild from scratch.
	r := &State{jobs: s.jobs, execs: s.execs, partitions: s.partitions}
	require.NoError(t, r.rebuildDerived(nil))
	require.Equal(t, r.partsOn, s.partsOn, "partitions per executor")
	require.Equal(t, r.specBytes, s.specBytes, "the specs' footprints")
	// Every tracked partition is the FINISHED current attempt of a producer
	// subtask, on the executor that ran it, of a job that runs and has a
	// consumer region still to finish.
	for id, p := range s.partitions {
		require.Equal(t, id, p.ID)
		e := s.execs[id]
		require.NotNil(t, e, "partition %s of no execution", id)
		require.Equal(t, wire.StateFinished, e.State, "partition %s of a %s execution", id, e.State)
		require.Equal(t, e.Executor, p.Executor, "partition %s's executor", id)
		j := s.jobs[p.Job]
		require.NotNil(t, j, "partition %s of no job", id)
		require.Same(t, e, s.current[j.ID][p.VertexIndex][p.Subtask], "partition %s is of the current attempt", id)
		require.True(t, s.partitionNeeded(j, p, consumersOf(j.Spec, p.VertexIndex)), "partition %s tracked but not needed (job %s)", id, j.Status)
	}
	require.Equal(t, len(r.byExecutor), len(s.byExecutor), "byExecutor")
	for ex, m := range r.byExecutor {
		require.Len(t, s.byExecutor[ex], len(m), "byExecutor[%s]", ex)
		for e := range m {
			require.Contains(t, s.byExecutor[ex], e)
		}
	}
	// A partial report's view of the expected set is the full view
	// narrowed to the ids it names, whatever they are.
	ids := append(sortedKeys(s.execs), "zz/v/0/0")
	for ex := range r.byExecutor {
		want, got := s.Expected(ex), s.ExpectedAmong(ex, ids)
		if len(want) == 0 {
			require.Empty(t, got)
		} else {
			require.Equal(t, want, got, "ExpectedAmong(%s)", ex)
		}
	}
	require.Equal(t, r.slotOf, s.slotOf, "slotOf")
	require.Equal(t, r.ready.pos == nil, s.ready.pos == nil)
	require.ElementsMatch(t, r.ready.items, s.ready.items, "ready")
	for i, it := range s.ready.items {
		require.Equal(t, i, s.ready.pos[it.ref], "ready queue position of %v", it.ref)
		require.Equal(t, s.jobs[it.ref.job].SubmitIndex, it.submit)
		if i > 0 {
			require.False(t, s.ready.Less(i, (i-1)/2), "ready queue: %v before its parent", it.ref)
		}
	}
	require.Len(t, s.ready.pos, len(s.ready.items))
	perJob := map[string]int{}
	for _, it := range s.ready.items {
		perJob[it.ref.job]++
	}
	require.Equal(t, perJob, s.ready.jobs, "ready regions per job")
	require.Equal(t, r.joinable, s.joinable, "joinable")
	joinable := map[string]struct{}{}
	for job := range perJob {
		if s.slotOf[job] != nil {
			joinable[job] = struct{}{}
		}
	}
	require.Equal(t, joinable, s.joinable, "joinable: the jobs holding slots with regions queued")
	require.Equal(t, r.restarting, s.restarting, "restarting")
	require.Equal(t, r.canceling, s.canceling, "canceling")
	require.Equal(t, r.live, s.live, "live executions per region")
	require.Equal(t, len(r.current), len(s.current), "current executions: jobs")
	for id, c := range r.current {
		for vi := range c {
			for i := range c[vi] {
				require.Same(t, c[vi][i], s.current[id][vi][i], "current execution of %s vertex %d subtask %d", id, vi, i)
			}
		}
	}
	require.Equal(t, len(r.slots), len(s.slots), "executors with slots in use")
	for ex, m := range r.slots {
		require.Len(t, s.slots[ex], len(m), "slots in use on %s", ex)
		for n, u := range m {
			got, ok := s.slots[ex][n]
			require.True(t, ok, "slot %s/%d in use", ex, n)
			require.Equal(t, u.key(), got.key(), "slot %s/%d's key", ex, n)
			require.Equal(t, u.refs, got.refs, "slot %s/%d's executions", ex, n)
			require.Same(t, s.slotOf[got.g.job][got.g.group], got.g, "slot %s/%d's group is in the table", ex, n)
		}
	}
	// One execution per subtask, matching the current attempt; counters
	// match; an ended job has nothing live.
	count := 0
	for _, j := range s.jobs {
		for vi, v := range j.Vertices {
			finished := 0
			for i, a := range v.Attempts {
				e := s.execs[ExecutionID(j.ID, j.Spec.Vertices[vi].ID, i, a)]
				require.NotNil(t, e, "current attempt of %s/%d", j.Spec.Vertices[vi].ID, i)
				count++
				if e.State == wire.StateFinished {
					finished++
				}
				if j.Status.Terminal() {
					require.True(t, e.State.Terminal(), "%s is %s in a %s job", e.ID, e.State, j.Status)
				}
			}
			require.Equal(t, finished, v.Finished, "finished counter of %s", j.Spec.Vertices[vi].ID)
		}
	}
	require.Equal(t, count, len(s.execs), "executions that are no current attempt")
	// A ready region can be placed: what it does not re-run has FINISHED.
	for ref := range s.ready.pos {
		j := s.jobs[ref.job]
		s.forEachInRegion(j, ref.region, func(e *Execution) {
			require.True(t, e.State == wire.StateScheduled || e.State == wire.StateFinished,
				"%s is %s in a ready region", e.ID, e.State)
		})
	}
}

// placeRegion places region of job j alone on executor, fresh slots.
func (h *harness) placeRegion(job string, region int, executor string) []Execution {
	h.t.Helper()
	for _, rr := range h.s.ReadyRegions() {
		if rr.Job == job && rr.Region == region {
			return h.place(rr, executor)
		}
	}
	h.t.Fatalf("region %s/%d not ready", job, region)
	return nil
}

// restoreOver replaces the harness's state with backup, as the masters
// install a restored one: the attempts the replaced state used carried
// into it (CarryAttempts), through a snapshot.
func (h *harness) restoreOver(backup *bytes.Buffer) {
	h.t.Helper()
	st, err := Restore(backup)
	require.NoError(h.t, err)
	st.CarryAttempts(h.s)
	var carried bytes.Buffer
	_, err = st.Capture().WriteTo(&carried)
	require.NoError(h.t, err)
	h.s, err = Restore(&carried)
	require.NoError(h.t, err)
}
