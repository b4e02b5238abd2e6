package integration

import (
	"testing"
	"time"

	"jobmaster/placement"
)

// With --placement pack the leader fills one executor before the next: a
// job of three runs on one executor of four slots, and the next job of one
// takes that executor's last slot, where spread would have put it on the
// empty one.
func TestPlacementPackFillsAnExecutorFirst(t *testing.T) {
	c := NewCluster(t, Options{Executors: 2, Slots: 4, Placement: placement.Pack})
	c.Submit("three", jobSpec(t, "three", noRestart, vertex{ID: "v", Parallelism: 3, Command: []string{"sh", "-c", "sleep 8"}}))
	on := c.runningOn(t, "three")
	first := on["v/0"]
	for k, ex := range on {
		if ex != first {
			t.Fatalf("three's subtasks on %v: %s is not on %s", on, k, first)
		}
	}
	c.Submit("one", jobSpec(t, "one", noRestart, vertex{ID: "v", Parallelism: 1, Command: []string{"sh", "-c", "sleep 3"}}))
	if ex := c.runningOn(t, "one")["v/0"]; ex != first {
		t.Fatalf("one runs on %s, not beside three on %s (its last free slot)", ex, first)
	}
	c.WaitJob("three", 30*time.Second, "FINISHED")
	c.WaitJob("one", 30*time.Second, "FINISHED")
}
