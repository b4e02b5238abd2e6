package leader

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"jobmaster/fsm"
	"jobmaster/placement"
	"jobmaster/wire"
)

// A scheduling pass reads the ready queue only as far as the free slots
// go (fsm.State.ReadyRegionsWithin): what it places is what a placement
// of the whole queue places, whenever no region declares resources; and
// with some that do, it places something whenever that would. (With no
// free slot at all a pass places only regions whose every key their job
// holds: scheduleJoining, tested on its own.)
func TestASchedulingPassPlacesWhatTheWholeQueueWould(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rapid.Check(t, func(rt *rapid.T) {
		w := &world{t: t, st: fsm.NewState(), now: t0}
		w.core = New(Config{Heartbeat: time.Second, Timeout: 10 * time.Second}, w.apply(&fsm.EstablishLeadership{Node: "m1"})[0].Epoch, t0)
		var members []Member
		n := rapid.IntRange(1, 4).Draw(rt, "executors")
		for i := range n {
			members = append(members, Member{ID: fmt.Sprintf("e%d", i), Addr: fmt.Sprintf("e%d:1", i), Slots: rapid.IntRange(1, 12).Draw(rt, "slots")})
		}
		w.core.Refresh(t0, members, nil)
		for _, m := range members {
			h, _ := w.core.Heartbeat(w.read, m.ID, t0)
			w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: m.ID, Slots: m.Slots, CPUMillis: 4000, MemoryMB: 1000}, t0))
		}
		for i := range rapid.IntRange(0, 40).Draw(rt, "jobs") {
			res := ""
			if rapid.IntRange(0, 5).Draw(rt, "resources") == 0 {
				res = fmt.Sprintf(`,"resources":{"memory_mb":%d}`, rapid.IntRange(100, 900).Draw(rt, "memory"))
			}
			w.submit(fmt.Sprintf("j%02d", i), fmt.Sprintf(`{"vertices":[{"id":"a","parallelism":%d,"command":["x"]%s},{"id":"b","parallelism":%d,"command":["x"],"slot_sharing_group":"%s"}]}`,
				rapid.IntRange(1, 6).Draw(rt, "pa"), res, rapid.IntRange(1, 6).Draw(rt, "pb"), rapid.SampledFrom([]string{"", "g"}).Draw(rt, "group")))
		}
		// Some passes, so that some jobs run and hold slots.
		for range rapid.IntRange(0, 2).Draw(rt, "passes before") {
			w.schedule()
		}
		// The whole queue, placed on the executors as the pass sees them.
		execs := w.core.schedulable(nil)
		var whole []fsm.ReadyRegion
		withResources := false
		w.read(func(st *fsm.State) {
			used, inUse := st.UsedSlots(), st.ResourcesInUse()
			for i := range execs {
				execs[i].Used, execs[i].InUse = used[execs[i].ID], inUse[execs[i].ID]
			}
			whole = st.ReadyRegions()
		})
		for _, r := range whole {
			for _, k := range r.Keys {
				withResources = withResources || !k.Resources.IsZero()
			}
		}
		want := map[Region]bool{}
		for _, p := range placement.Plan(whole, execs) {
			want[Region{p.Job, p.Region}] = true
		}
		plan := w.core.Schedule(w.read, t0)
		if plan.NoFreeSlot {
			return // nothing to compare: no region could join held slots
		}
		got := map[Region]bool{}
		for _, c := range plan.Propose {
			p := c.(*fsm.PlaceRegion)
			got[Region{p.Job, p.Region}] = true
		}
		if !withResources {
			if fmt.Sprint(got) != fmt.Sprint(want) {
				rt.Fatalf("the pass placed %v, the whole queue %v", got, want)
			}
		} else if len(want) > 0 && len(got) == 0 {
			rt.Fatalf("the pass placed nothing, the whole queue %v", want)
		}
	})
}
