package leader

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"jobmaster/fsm"
	"jobmaster/wire"
)

func placedOf(p Plan) []Region {
	var out []Region
	for _, c := range p.Propose {
		pr := c.(*fsm.PlaceRegion)
		out = append(out, Region{pr.Job, pr.Region})
	}
	return out
}

func slotsWorld(t *testing.T, now time.Time, slots int) *world {
	return newWorldSlots(t, Config{Heartbeat: time.Second, Timeout: time.Hour}, now, slots, "e0")
}

// Behind 1,000 waiting regions that need more slots than are free, a job
// that fits the free slots is placed (docs/architecture.md: "A region that
// does not fit is skipped; smaller ones after it may still be placed"):
// regions too big for every free slot do not count towards the pass's
// bound on regions passed over.
func TestASmallJobIsPlacedBehindAThousandBigOnes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := slotsWorld(t, t0, 2)
	w.submit("long", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`)
	if d := w.schedule(); len(d) != 1 {
		t.Fatalf("long: %v", d)
	}
	for i := range 1000 {
		w.submit(fmt.Sprintf("big%04d", i), `{"vertices":[{"id":"v","parallelism":2,"command":["x"]}]}`)
	}
	w.submit("small", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`)
	for range 5 {
		p := w.core.Schedule(w.read, t0)
		if got := placedOf(p); len(got) != 0 {
			return
		}
		w.commit(p.Ready)
	}
	var free int
	w.read(func(st *fsm.State) { free = 2 - st.SlotsInUse()["e0"] })
	t.Fatalf("after 5 passes, job small (1 slot) is still not placed with %d slot free", free)
}

// A region that needs no new slot (its keys held by its job's running
// region) is placed in the pass whose older regions take the free slots:
// left after the cut, it would wait for an unrelated slot to free. And it
// is placed while every slot is taken: a pass without a free slot looks
// for such regions (before, none ran then, and the region waited until
// any slot anywhere freed). Such regions are found from the queue or from
// the jobs holding slots, whichever is shorter: both ways are run, with no
// other job running and with more running jobs than jobs queued.
func TestARegionSharingHeldSlotsIsPlacedInThePassOfTheCut(t *testing.T) {
	for _, others := range []int{0, 3} {
		t.Run(fmt.Sprintf("others running=%d", others), func(t *testing.T) { regionSharingHeldSlots(t, others, false) })
	}
}

func TestARegionSharingHeldSlotsIsPlacedWhileEverySlotIsTaken(t *testing.T) {
	for _, others := range []int{0, 3} {
		t.Run(fmt.Sprintf("others running=%d", others), func(t *testing.T) { regionSharingHeldSlots(t, others, true) })
	}
}

// regionSharingHeldSlots: x holds 2 of 3 slots (with others more, each
// running a job of its own), a waits for 2, b holds the third with two
// regions sharing it; b's region 1 fails and restarts, while the cluster
// is full, or once x has ended and a is about to take x's two slots.
func regionSharingHeldSlots(t *testing.T, others int, full bool) {
	t0 := time.Unix(1000, 0)
	w := slotsWorld(t, t0, 3+others)
	pass := func() []Region { p := w.core.Schedule(w.read, t0); w.commit(p.Ready); return placedOf(p) }
	for i := range others {
		w.submit(fmt.Sprintf("o%d", i), `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`)
	}
	if d := pass(); len(d) != others {
		t.Fatalf("others: %v", d)
	}
	w.submit("x", `{"vertices":[{"id":"v","parallelism":2,"command":["x"]}]}`)
	if d := pass(); len(d) != 1 {
		t.Fatalf("x: %v", d)
	}
	w.submit("a", `{"vertices":[{"id":"v","parallelism":2,"command":["x"]}]}`) // waits: 1 free
	// b: two independent regions sharing slot key (default, 0).
	w.submit("b", `{"restart":{"strategy":"fixed-delay","attempts":10,"delay":"0s"},"failover":"region","vertices":[{"id":"p","parallelism":1,"command":["x"]},{"id":"q","parallelism":1,"command":["x"]}]}`)
	if d := pass(); len(d) != 2 {
		t.Fatalf("b: %v", d)
	}
	// The cluster is full, a waits: no pass.
	if p := w.core.Schedule(w.read, t0); !p.NoFreeSlot {
		t.Fatalf("want no free slot, got %+v", placedOf(p))
	}
	report := func(id string, st wire.State) {
		w.commit(Ready{Propose: []fsm.Command{&fsm.ReportExecutions{Fenced: w.core.fenced(t0), Executor: "e0",
			Updates: []fsm.ReportUpdate{{ID: id, State: st}}}}})
	}
	report("b/p/0/0", wire.StateRunning)
	report("b/q/0/0", wire.StateFailed) // region 1 of b restarts, sharing b/p's slot
	if !full {
		// x ends: two slots free, which a takes.
		report("x/v/0/0", wire.StateFinished)
		report("x/v/1/0", wire.StateFinished)
	}
	r, _ := w.core.Restarts(w.read, t0.Add(time.Second))
	w.commit(r)
	p := w.core.Schedule(w.read, t0)
	got := placedOf(p)
	w.commit(p.Ready)
	if !slices.Contains(got, Region{"b", 1}) {
		var ready []fsm.ReadyRegion
		w.read(func(st *fsm.State) { ready = st.ReadyRegions() })
		t.Fatalf("pass placed %v (NoFreeSlot=%v); ready %+v", got, p.NoFreeSlot, ready)
	}
	if want := !full; slices.Contains(got, Region{"a", 0}) != want {
		t.Fatalf("pass placed %v: a placed should be %v", got, want)
	}
}

// A region that would join a slot its job holds on an executor that takes
// no new work (here its disk is full) waits, whether or not another
// executor has a free slot: such an executor gets no new placement
// (docs/operations.md). So does one whose resources its holder does not
// have free, while every slot is taken.
func TestARegionJoiningHeldSlotsWaitsOnAnExecutorTakingNoWork(t *testing.T) {
	for _, c := range []struct {
		name      string
		spare     bool
		resources string
		diskFull  bool
	}{
		{"every slot taken", false, "", true},
		{"a slot free elsewhere", true, "", true},
		{"every slot taken, resources over the capacity of a holder taking work", false, `,"resources":{"memory_mb":5000}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			ids := []string{"e0"}
			if c.spare {
				ids = append(ids, "e1")
			}
			w := newWorldSlots(t, Config{Heartbeat: time.Second, Timeout: time.Hour}, t0, 1, ids...)
			if c.spare {
				w.submit("a", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`)
			}
			w.submit("b", `{"restart":{"strategy":"fixed-delay","attempts":10,"delay":"0s"},"failover":"region","vertices":[{"id":"p","parallelism":1,"command":["x"]},{"id":"q","parallelism":1,"command":["x"]`+c.resources+`}]}`)
			w.schedule()
			holder, other := "", ""
			for _, ex := range ids {
				w.st.ExpectedEach(ex, func(e *fsm.Execution) {
					if e.Job == "b" {
						holder = ex
					} else {
						other = ex
					}
				})
			}
			if holder == "" {
				t.Fatal("b not placed")
			}
			h, _ := w.core.Heartbeat(w.read, holder, t0)
			w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: holder, Slots: 1, DiskFull: c.diskFull, CPUMillis: 1000, MemoryMB: 1000}, t0))
			report := func(ex, id string, st wire.State) {
				w.commit(Ready{Propose: []fsm.Command{&fsm.ReportExecutions{Fenced: w.core.fenced(t0), Executor: ex,
					Updates: []fsm.ReportUpdate{{ID: id, State: st}}}}})
			}
			if c.spare {
				report(other, "a/v/0/0", wire.StateFinished)
			}
			report(holder, "b/p/0/0", wire.StateRunning)
			report(holder, "b/q/0/0", wire.StateFailed)
			r, _ := w.core.Restarts(w.read, t0.Add(time.Second))
			w.commit(r)
			if p := w.core.Schedule(w.read, t0); len(p.Propose) != 0 {
				t.Fatalf("placed %v on %s", placedOf(p), holder)
			}
		})
	}
}
