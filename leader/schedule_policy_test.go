package leader

import (
	"testing"
	"time"

	"jobmaster/placement"
	"jobmaster/wire"
)

// The leader places by its configured policy: with Spread a job of three
// goes to three executors of four free slots, with Pack to one.
func TestSchedulePlacesByPolicy(t *testing.T) {
	for _, c := range []struct {
		policy    placement.Policy
		executors int
	}{{placement.Spread, 3}, {placement.Pack, 1}} {
		t.Run(c.policy.String(), func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			w := newWorldSlots(t, Config{Heartbeat: time.Second, Timeout: time.Hour, Placement: c.policy}, t0, 4, "e1", "e2", "e3")
			w.submit("a", `{"vertices":[{"id":"v","parallelism":3,"command":["x"]}]}`)
			if d := w.schedule(); len(d) != c.executors {
				t.Fatalf("deployed to %d executors (%+v), want %d", len(d), d, c.executors)
			}
		})
	}
}

// The submit-time fit check asks the scheduler's own policy: on an idle
// fleet of e0 (2 slots, 200 millis) and e1 (1 slot, 300 millis), a region
// of a 200-milli and a 300-milli slot fits spread (200 on e0, the most
// free, 300 on e1) but never packed (200 on e1, the fewest free, and no
// room left for 300): packed it is refused at submit rather than left
// waiting for good.
func TestUnfitAsksThePolicy(t *testing.T) {
	spec := `{"vertices":[{"id":"a","parallelism":1,"command":["x"],"slot_sharing_group":"g0","resources":{"cpu_millis":200}},
		{"id":"b","parallelism":1,"command":["x"],"slot_sharing_group":"g1","resources":{"cpu_millis":300},"inputs":[{"from":"a"}]}]}`
	for _, c := range []struct {
		policy placement.Policy
		fits   bool
	}{{placement.Spread, true}, {placement.Pack, false}} {
		t.Run(c.policy.String(), func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			w := newWorld(t, Config{Heartbeat: time.Second, Timeout: time.Hour, Placement: c.policy}, t0)
			w.core.Refresh(t0, []Member{{ID: "e0", Addr: "e0:1", Slots: 2}, {ID: "e1", Addr: "e1:1", Slots: 1}}, nil)
			for id, cpu := range map[string]int64{"e0": 200, "e1": 300} {
				h, _ := w.core.Heartbeat(w.read, id, t0)
				w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: id, Slots: map[string]int{"e0": 2, "e1": 1}[id], CPUMillis: cpu, MemoryMB: 100}, t0))
			}
			err := w.core.Unfit(parse(t, spec))
			w.submit("j", spec)
			placed := len(w.schedule()) > 0
			if placed != c.fits || (err == nil) != c.fits {
				t.Fatalf("placed on an idle fleet: %v; Unfit: %v; want fits=%v", placed, err, c.fits)
			}
		})
	}
}
