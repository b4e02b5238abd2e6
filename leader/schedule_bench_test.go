package leader

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSchedulePass is one scheduling pass as the leader runs it while
// small jobs arrive: a fleet of 1,000 executors of 10 slots, half of them
// in use by 500 running jobs of 10, and 3 new jobs of 10 ready. The pass
// is read only (its plan is not committed), so every iteration plans the
// same 3 jobs: what it costs is what a pass pays per placement it makes
// while a backlog-free stream of jobs comes in.
//
//	go test -run '^$' -bench BenchmarkSchedulePass -benchmem ./leader/
func BenchmarkSchedulePass(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("executors=%d", n), func(b *testing.B) {
			t0 := time.Unix(1_700_000_000, 0)
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("e%04d", i)
			}
			w := newWorldSlots(b, Config{Heartbeat: time.Second, Timeout: time.Hour}, t0, 10, ids...)
			const spec = `{"vertices":[{"id":"v","parallelism":10,"command":["/bin/true"]}]}`
			for j := range n / 2 {
				w.submit(fmt.Sprintf("run-%04d", j), spec)
			}
			if d := w.schedule(); len(d) == 0 {
				b.Fatal("nothing deployed")
			}
			for j := range 3 {
				w.submit(fmt.Sprintf("new-%d", j), spec)
			}
			b.ReportAllocs()
			for b.Loop() {
				if p := w.core.Schedule(w.read, t0); len(p.Propose) != 3 {
					b.Fatalf("placed %d of 3 jobs", len(p.Propose))
				}
			}
		})
	}
}

// BenchmarkSchedulePassFull is a pass while every slot is taken: 1,000
// executors of 10 slots run 1,000 jobs of 10, and 1,000 more wait. It runs
// after every change of the state, so it must cost little more than a
// count.
//
//	go test -run '^$' -bench BenchmarkSchedulePassFull -benchmem ./leader/
func BenchmarkSchedulePassFull(b *testing.B) {
	t0 := time.Unix(1_700_000_000, 0)
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("e%04d", i)
	}
	w := newWorldSlots(b, Config{Heartbeat: time.Second, Timeout: time.Hour}, t0, 10, ids...)
	const spec = `{"vertices":[{"id":"v","parallelism":10,"command":["/bin/true"]}]}`
	for j := range 1000 {
		w.submit(fmt.Sprintf("run-%04d", j), spec)
	}
	w.schedule()
	for j := range 1000 {
		w.submit(fmt.Sprintf("wait-%04d", j), spec)
	}
	b.ReportAllocs()
	for b.Loop() {
		if p := w.core.Schedule(w.read, t0); !p.NoFreeSlot {
			b.Fatalf("placed %d with every slot taken", len(p.Propose))
		}
	}
}
