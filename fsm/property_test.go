package fsm

import (
	"bytes"
	"fmt"
	"jobmaster/wire"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var propertySpecs = []string{
	`{"vertices":[{"id":"v","parallelism":2,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":2,"delay":"1s"}}`,
	pipeline,
	`{"vertices":[{"id":"x","parallelism":1,"command":["x"]},{"id":"y","parallelism":2,"command":["x"],"slot_sharing_group":"g"},
		{"id":"z","parallelism":1,"command":["x"],"inputs":[{"from":"x","mode":"blocking"},{"from":"y","mode":"blocking"}]}],
		"failover":"full","restart":{"strategy":"exponential-delay","initial_delay":"1s","max_delay":"4s","attempts":3}}`,
	`{"vertices":[{"id":"v","parallelism":3,"command":["x"]}],"restart":{"strategy":"failure-rate","max_failures":2,"interval":"10s","delay":"0s"}}`,
	`{"vertices":[{"id":"v","parallelism":1,"command":["x"]}],"restart":{"strategy":"none"}}`,
	// Two regions of one slot sharing group: the one placed second joins
	// the slots the first holds.
	`{"vertices":[{"id":"a","parallelism":2,"command":["x"]},{"id":"b","parallelism":3,"command":["x"]}]}`,
	// Data exchange: a blocking all-to-all edge and a forward one.
	`{"vertices":[{"id":"g","parallelism":2,"command":["x"]},{"id":"s","parallelism":2,"command":["x"],"inputs":[{"from":"g","mode":"blocking"}]},
		{"id":"f","parallelism":2,"command":["x"],"inputs":[{"from":"s","mode":"blocking","distribution":"forward"}]}],
		"restart":{"strategy":"fixed-delay","attempts":4,"delay":"500ms"}}`,
	// One producer, one consumer: its input is often lost after it was
	// read, and then it fails.
	`{"vertices":[{"id":"p","parallelism":1,"command":["x"]},{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"p","mode":"blocking"}]}],
		"restart":{"strategy":"fixed-delay","attempts":6,"delay":"0s"}}`,
}

var (
	propertyJobs      = []string{"a", "b", "c", "d"}
	propertyExecutors = []string{"e1", "e2", "e3"}
	propertyStates    = []wire.State{wire.StateDeploying, wire.StateRunning, wire.StateFinished, wire.StateFailed, wire.StateCanceled, wire.StateCanceling, "BOGUS"}
)

// genCommand draws a command that makes sense in state s (or, sometimes, a
// deliberately stale or ill-fitting one).
func genCommand(t *rapid.T, s *State, token *uint64, now *int64) Command {
	f := func() Fenced { return Fenced{Token: *token, Time: *now} }
	switch rapid.IntRange(0, 13).Draw(t, "kind") {
	case 0:
		return &SubmitJob{Fenced: f(), ID: rapid.SampledFrom(propertyJobs).Draw(t, "job"),
			Spec: parseSpec(t, rapid.SampledFrom(propertySpecs).Draw(t, "spec"))}
	case 1:
		return &EstablishLeadership{Node: rapid.SampledFrom([]string{"m1", "m2", "m3"}).Draw(t, "node")}
	case 2:
		c := &CancelJob{Fenced: f(), ID: rapid.SampledFrom(propertyJobs).Draw(t, "job")}
		if rapid.Bool().Draw(t, "stale") {
			c.Token--
		}
		return c
	case 3, 4:
		ready := s.ReadyRegions()
		if len(ready) == 0 {
			*now += 100
			return &RestartRegions{Fenced: f(), Job: rapid.SampledFrom(propertyJobs).Draw(t, "job")}
		}
		rr := rapid.SampledFrom(ready).Draw(t, "region")
		ex := rapid.SampledFrom(propertyExecutors).Draw(t, "executor")
		// Sometimes a taken slot: the placement must be rejected whole.
		return placeOn(s, rr, ex, f(), func() bool { return rapid.IntRange(0, 9).Draw(t, "collide") == 0 })
	case 5, 6, 7:
		ex := rapid.SampledFrom(propertyExecutors).Draw(t, "executor")
		live := s.Expected(ex)
		c := &ReportExecutions{Fenced: f(), Executor: ex}
		for _, e := range live {
			if rapid.Bool().Draw(t, "include") {
				u := ReportUpdate{ID: e.ID, State: rapid.SampledFrom(propertyStates).Draw(t, "state")}
				if e.State == wire.StateDeploying && rapid.Bool().Draw(t, "starts") {
					// Often a task starts, and runs for a while: its
					// inputs may be lost after it read them.
					u.State = wire.StateRunning
				}
				switch {
				case u.State == wire.StateFinished:
					u.Bytes = int64(rapid.IntRange(0, 100).Draw(t, "bytes"))
				case u.State == wire.StateFailed && rapid.Bool().Draw(t, "unavailable"):
					// A consumer that could not fetch some partition.
					if ps := s.Partitions(); len(ps) > 0 {
						u.Unavailable = []string{rapid.SampledFrom(ps).Draw(t, "partition").ID}
					}
				}
				c.Updates = append(c.Updates, u)
			}
		}
		if rapid.IntRange(0, 4).Draw(t, "unknown") == 0 {
			c.Updates = append(c.Updates, ReportUpdate{ID: "zz/v/0/0", State: wire.StateFinished})
		}
		return c
	case 8:
		ex := rapid.SampledFrom(propertyExecutors).Draw(t, "executor")
		c := &FailExecutions{Fenced: f(), Executor: ex, Reason: "missing"}
		for _, e := range s.Expected(ex) {
			if rapid.Bool().Draw(t, "fail") {
				c.IDs = append(c.IDs, e.ID)
			}
		}
		return c
	case 9:
		if rapid.IntRange(0, 3).Draw(t, "forget") == 0 {
			c := &ForgetJobs{Fenced: f(), IDs: []string{rapid.SampledFrom(propertyJobs).Draw(t, "job")}}
			if rapid.Bool().Draw(t, "prune") {
				c.PruneBefore = *now + 1 // the id's next job starts above its floor
			}
			return c
		}
		return &ExecutorLost{Fenced: f(), Executor: rapid.SampledFrom(propertyExecutors).Draw(t, "executor")}
	case 12:
		// Partitions a report no longer shows.
		ex := rapid.SampledFrom(propertyExecutors).Draw(t, "executor")
		c := &LosePartitions{Fenced: f(), Executor: ex, Reason: "gone from " + ex}
		for _, p := range s.PartitionsOn(ex) {
			if rapid.Bool().Draw(t, "lose") {
				c.IDs = append(c.IDs, p.ID)
			}
		}
		return c
	case 13:
		// Drains: start one, move what is left at the deadline, end one.
		ex := rapid.SampledFrom(propertyExecutors).Draw(t, "executor")
		switch rapid.IntRange(0, 2).Draw(t, "drain") {
		case 0:
			deadline := int64(rapid.IntRange(0, 5000).Draw(t, "deadline"))
			if rapid.Bool().Draw(t, "long") {
				deadline = 3_600_000 // it stays early: only free moves apply
			}
			return &DrainExecutor{Fenced: f(), Executor: ex, DeadlineMs: deadline}
		case 1:
			// Mostly of an executor that drains; at its deadline, or
			// before it (applied only when free).
			if ds := s.Drains(); len(ds) > 0 && rapid.IntRange(0, 3).Draw(t, "draining") > 0 {
				ex = rapid.SampledFrom(ds).Draw(t, "drain").Executor
			}
			if d, ok := s.DrainOf(ex); ok && rapid.IntRange(0, 3).Draw(t, "due") == 0 && d.Deadline > *now {
				*now = d.Deadline
			}
			return &MoveExecutor{Fenced: f(), Executor: ex}
		}
		return &UndrainExecutor{Fenced: f(), Executor: ex}
	default:
		*now += int64(rapid.IntRange(0, 5000).Draw(t, "tick"))
		return &RestartRegions{Fenced: f(), Job: rapid.SampledFrom(propertyJobs).Draw(t, "job")}
	}
}

// TestPropertySnapshotRestoreMidway: any command sequence gives the same
// state hash applied straight through as through a snapshot and restore at
// any point, and the invariants hold after every entry.
func TestPropertySnapshotRestoreMidway(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := NewState()
		var b *State
		var token uint64
		now := int64(1_000_000)
		steps := rapid.IntRange(1, 120).Draw(t, "steps")
		cut := rapid.IntRange(0, steps).Draw(t, "cut")
		for i := 0; i < steps; i++ {
			if i == cut {
				var buf bytes.Buffer
				_, err := a.Capture().WriteTo(&buf)
				require.NoError(t, err)
				b, err = Restore(&buf)
				require.NoError(t, err)
				require.Equal(t, a.Capture().Hash(), b.Capture().Hash())
			}
			// One entry may carry several commands.
			n := rapid.IntRange(1, 3).Draw(t, "batch")
			var entry []byte
			for k := 0; k < n; k++ {
				var err error
				entry, err = Encode(entry, genCommand(t, a, &token, &now))
				require.NoError(t, err)
			}
			index := a.Index() + 1
			ra := a.ApplyEntry(index, entry)
			for _, r := range ra {
				if r.Epoch != 0 {
					token = r.Epoch
				}
			}
			checkInvariants(t, a)
			if b != nil {
				rb := b.ApplyEntry(index, entry)
				require.Equal(t, fmt.Sprint(ra), fmt.Sprint(rb), "results at index %d", index)
			}
		}
		if b != nil {
			require.Equal(t, a.Capture().Hash(), b.Capture().Hash())
			checkInvariants(t, b)
		}
	})
}

// TestPropertyAtMostOneLiveAttempt: a subtask never has two live executions,
// a placed execution never shares its slot with another job's, a terminal
// state, once recorded, never changes, and an execution id is never used
// twice (not even by a job submitted again after it was forgotten).
func TestPropertyAtMostOneLiveAttempt(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := NewState()
		ended := map[string]wire.State{}
		var token uint64
		now := int64(1_000_000)
		for i := rapid.IntRange(1, 150).Draw(t, "steps"); i > 0; i-- {
			for _, r := range s.ApplyEntry(s.Index()+1, MustEncode(genCommand(t, s, &token, &now))) {
				if r.Epoch != 0 {
					token = r.Epoch
				}
			}
			live := map[string]string{}
			for _, e := range s.execs {
				if e.State.Terminal() {
					if prev, ok := ended[e.ID]; ok {
						require.Equal(t, prev, e.State, "terminal state of %s changed", e.ID)
					}
					ended[e.ID] = e.State
					continue
				}
				require.NotContains(t, ended, e.ID, "%s came back to life", e.ID)
				sub := fmt.Sprintf("%s/%s/%d", e.Job, e.Vertex, e.Subtask)
				require.NotContains(t, live, sub, "two live attempts of %s", sub)
				live[sub] = e.ID
			}
			for ex, slots := range s.slots {
				for n, u := range slots {
					for e := range s.byExecutor[ex] {
						if e.Slot == n {
							require.Equal(t, u.key().job, e.Job, "slot %s/%d", ex, n)
						}
					}
				}
			}
		}
	})
}

// placeOn places ready region rr on executor ex, new slots in order (with
// collide, the next one may be slot 0, taken or not), held ones where they
// are.
func placeOn(s *State, rr ReadyRegion, ex string, f Fenced, collide func() bool) *PlaceRegion {
	used := map[int]bool{}
	for _, n := range s.UsedSlots()[ex] {
		used[n] = true
	}
	next := 0
	c := &PlaceRegion{Fenced: f, Job: rr.Job, Region: rr.Region}
	for _, k := range rr.Keys {
		if k.Held {
			c.Slots = append(c.Slots, SlotAssign{Group: k.Group, Index: k.Index, Executor: k.Executor, Slot: k.Slot})
			continue
		}
		for used[next] {
			next++
		}
		if collide != nil && collide() {
			next = 0
		}
		used[next] = true
		c.Slots = append(c.Slots, SlotAssign{Group: k.Group, Index: k.Index, Executor: ex, Slot: next})
	}
	return c
}

// TestPropertyAnEarlyMoveRestartsNothing: a move before its drain's
// deadline that applies (it costs nothing: FreeToMove) changes no
// execution, no job's status or restarts and no region: it only drops
// partitions every consumer has read.
func TestPropertyAnEarlyMoveRestartsNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := NewState()
		var token uint64
		now := int64(1_000_000)
		for i := rapid.IntRange(1, 150).Draw(t, "steps"); i > 0; i-- {
			c := genCommand(t, s, &token, &now)
			mv, early := c.(*MoveExecutor)
			var before string
			if early {
				d, ok := s.DrainOf(mv.Executor)
				early = ok && mv.Time < d.Deadline
				before = workSignature(s)
			}
			rs := s.ApplyEntry(s.Index()+1, MustEncode(c))
			for _, r := range rs {
				if r.Epoch != 0 {
					token = r.Epoch
				}
			}
			if early && rs[0].Err == nil {
				require.Equal(t, before, workSignature(s), "an early move of %s changed work", mv.Executor)
			}
		}
	})
}

// workSignature is every execution's state, and every job's status,
// restarts and region statuses.
func workSignature(s *State) string {
	var b strings.Builder
	for _, id := range sortedKeys(s.execs) {
		fmt.Fprintf(&b, "%s=%s;", id, s.execs[id].State)
	}
	for _, id := range sortedKeys(s.jobs) {
		j := s.jobs[id]
		fmt.Fprintf(&b, "%s:%s:%d:", id, j.Status, j.Restarts)
		for _, r := range j.Regions {
			fmt.Fprintf(&b, "%v,", r.Status)
		}
	}
	return b.String()
}
