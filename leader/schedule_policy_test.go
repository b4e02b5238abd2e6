package leader

import (
	"testing"
	"time"

	"jobmaster/placement"
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
