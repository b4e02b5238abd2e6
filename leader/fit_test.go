package leader

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/placement"
	"jobmaster/wire"
)

func parse(t *testing.T, spec string) *jobspec.Spec {
	t.Helper()
	s, err := jobspec.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestUnfit: a region with resources that no executor, or not all of them
// together, could take is refused, naming it; without known capacity, or
// without resources, nothing is.
func TestUnfit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 10 * time.Second}, t0)
	big := parse(t, `{"vertices": [{"id": "small", "parallelism": 1, "command": ["x"]},
		{"id": "train", "parallelism": 1, "command": ["x"], "resources": {"memory_mb": 8192}}]}`)
	if err := w.core.Unfit(big); err != nil {
		t.Fatalf("refused with no capacity known: %v", err)
	}
	w.core.Refresh(t0, []Member{{ID: "e1", Addr: "e1:1", Slots: 2}, {ID: "e2", Addr: "e2:1", Slots: 2}}, nil)
	for _, id := range []string{"e1", "e2"} {
		h, _ := w.core.Heartbeat(w.read, id, t0)
		w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: id, Slots: 2, CPUMillis: 2000, MemoryMB: 4096}, t0))
	}
	err := w.core.Unfit(big)
	if err == nil || !strings.Contains(err.Error(), "region of vertices train can never fit: a slot of it needs cpu_millis=0 memory_mb=8192") {
		t.Fatalf("error %v", err)
	}
	wide := parse(t, `{"vertices": [{"id": "a", "parallelism": 3, "command": ["x"], "resources": {"memory_mb": 3000}}]}`)
	if err := w.core.Unfit(wide); err == nil || !strings.Contains(err.Error(), "it needs its 3 slots at once (cpu_millis=0 memory_mb=9000 in all), and the 2 executors known could hold at most 2 of them") {
		t.Fatalf("error %v", err)
	}
	// The totals fit (1,800 of 4,000 millicores), but an executor holds
	// one such slot: 2 of the 3 at once.
	perSlot := parse(t, `{"vertices": [{"id": "a", "parallelism": 3, "command": ["x"], "resources": {"cpu_millis": 1200}}]}`)
	if err := w.core.Unfit(perSlot); err == nil || !strings.Contains(err.Error(), "it needs its 3 slots at once (cpu_millis=3600 memory_mb=0 in all), and the 2 executors known could hold at most 2 of them, counting each one's CPU and memory (2 offer cpu_millis=2000 memory_mb=4096 each) and its slots") {
		t.Fatalf("error %v", err)
	}
	for _, ok := range []string{
		`{"vertices": [{"id": "a", "parallelism": 2, "command": ["x"], "resources": {"memory_mb": 3000}}]}`,
		`{"vertices": [{"id": "a", "parallelism": 50, "command": ["x"]}]}`,
	} {
		if err := w.core.Unfit(parse(t, ok)); err != nil {
			t.Fatalf("%s refused: %v", ok, err)
		}
	}
}

// TestScheduleCountsResources: a second task that needs memory its
// executor no longer has waits, though a slot is free.
func TestScheduleCountsResources(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWorld(t, Config{Heartbeat: time.Second, Timeout: 10 * time.Second}, t0)
	w.core.Refresh(t0, []Member{{ID: "e1", Addr: "e1:1", Slots: 4}}, nil)
	h, _ := w.core.Heartbeat(w.read, "e1", t0)
	w.commit(w.core.HeartbeatAnswered(w.read, h, &wire.Report{Version: wire.Version, Executor: "e1", Slots: 4, CPUMillis: 1000, MemoryMB: 1024}, t0))
	w.submit("a", `{"vertices": [{"id": "v", "parallelism": 1, "command": ["run"], "resources": {"memory_mb": 600}}]}`)
	if d := w.schedule(); len(d) != 1 {
		t.Fatalf("deploys %+v, want a", d)
	}
	w.submit("b", `{"vertices": [{"id": "v", "parallelism": 1, "command": ["run"], "resources": {"memory_mb": 600}}]}`)
	if p := w.core.Schedule(w.read, t0); len(p.Propose) != 0 || len(p.Waiting) != 1 {
		t.Fatalf("plan %+v, want b waiting: 424 MiB are free", p)
	}
}

// mostPlaced never says fewer keys fit than the scheduler's own rule
// places: whenever placement.Plan places a region whole, the bound is
// every key.
func TestMostPlacedIsABound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var rr fsm.ReadyRegion
		for i := range rapid.IntRange(1, 8).Draw(t, "keys") {
			rr.Keys = append(rr.Keys, fsm.SlotNeed{Index: i, Resources: jobspec.Resources{
				CPUMillis: rapid.Int64Range(0, 3000).Draw(t, "cpu"), MemoryMB: rapid.Int64Range(0, 3000).Draw(t, "mem")}})
		}
		rr.Executions = len(rr.Keys)
		var fleet []placement.Executor
		for i := range rapid.IntRange(1, 4).Draw(t, "executors") {
			fleet = append(fleet, placement.Executor{ID: fmt.Sprintf("e%d", i), Slots: rapid.IntRange(1, 4).Draw(t, "slots"),
				Capacity: jobspec.Resources{CPUMillis: rapid.Int64Range(0, 6000).Draw(t, "ecpu"), MemoryMB: rapid.Int64Range(0, 6000).Draw(t, "emem")}})
		}
		if len(placement.Plan([]fsm.ReadyRegion{rr}, fleet)) == 1 {
			if got := mostPlaced(rr.Keys, fleet); got != len(rr.Keys) {
				t.Fatalf("placed whole, but the bound says %d of %d", got, len(rr.Keys))
			}
		}
	})
}
