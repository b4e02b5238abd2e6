package fsm

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// bigState builds a state with n executions: jobs of 1,000 subtasks each,
// placed and running.
func bigState(b *testing.B, n int) *State {
	b.Helper()
	s := NewState()
	idx := uint64(1)
	s.ApplyEntry(idx, MustEncode(&EstablishLeadership{Node: "m1"}))
	tok := s.Epoch()
	spec := parseSpec(b, `{"vertices":[{"id":"v","parallelism":1000,"command":["true"]}]}`)
	for j := 0; j < n/1000; j++ {
		idx++
		id := fmt.Sprintf("job-%06d", j)
		s.ApplyEntry(idx, MustEncode(&SubmitJob{Fenced: Fenced{Token: tok}, ID: id, Spec: spec}))
		slots := make([]SlotAssign, 1000)
		for i := range slots {
			slots[i] = SlotAssign{Group: "default", Index: i, Executor: fmt.Sprintf("e%04d", (j*1000+i)/100), Slot: i % 100}
		}
		idx++
		s.ApplyEntry(idx, MustEncode(&PlaceRegion{Fenced: Fenced{Token: tok}, Job: id, Region: 0, Slots: slots}))
	}
	return s
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkSnapshotRestore1M captures, persists and restores a state of
// 1,000,000 placed executions (1,000 jobs of 1,000 subtasks on 10,000
// executors). memory reports the live heap the state holds per execution
// (jobs, executions and the derived indexes); persist reports the snapshot's
// size, in MB and per execution.
//
//	go test -run '^$' -bench BenchmarkSnapshotRestore1M -benchtime 2x ./fsm/
func BenchmarkSnapshotRestore1M(b *testing.B) {
	const n = 1_000_000
	before := heapInUse()
	s := bigState(b, n)
	held := float64(heapInUse()-before) / n
	b.Run("memory", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = s.NumExecutions()
		}
		b.ReportMetric(held, "heap-B/exec")
	})
	var buf bytes.Buffer
	b.Run("capture", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = s.Capture()
		}
	})
	b.Run("persist", func(b *testing.B) {
		c := s.Capture()
		for i := 0; i < b.N; i++ {
			buf.Reset()
			if _, err := c.WriteTo(&buf); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(buf.Len())/1e6, "MB")
		b.ReportMetric(float64(buf.Len())/n, "snap-B/exec")
	})
	b.Run("restore", func(b *testing.B) {
		if buf.Len() == 0 {
			if _, err := s.Capture().WriteTo(&buf); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := Restore(bytes.NewReader(buf.Bytes())); err != nil {
				b.Fatal(err)
			}
		}
	})
	runtime.KeepAlive(s)
}
