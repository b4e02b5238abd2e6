package leader

import (
	"time"

	"jobmaster/fsm"
	"jobmaster/placement"
)

// Region names a pipelined region of a job.
type Region struct {
	Job    string
	Region int
}

// Plan is a scheduling pass: the placements to propose (in Ready; once
// committed, Committed turns the executions placed into deployments) and
// what still waits.
type Plan struct {
	Ready
	// NoFreeSlot: regions are ready, but no executor that takes work has a
	// free slot, so no plan was made.
	NoFreeSlot bool
	// Waiting is the ready regions the plan could not place.
	Waiting []Region
}

// Schedule places the ready regions that fit onto the executors that take
// work (placement.Plan), at now.
func (c *Core) Schedule(read Reader, now time.Time) Plan {
	// Nothing to plan without a free slot but the regions that need none:
	// jobs queued for slots cost a count per executor and a look for
	// those, not a pass (with thousands queued, listing and ordering them
	// on every submission took half the leader's CPU).
	var inUse map[string]int
	var draining map[string]bool
	read(func(st *fsm.State) {
		if st.HasReady() {
			inUse = st.SlotsInUse()
			draining = st.DrainingSet()
		}
	})
	if inUse == nil {
		return Plan{}
	}
	// Without a free slot only the regions that need none can be placed
	// (they join slots their job holds: a region of a running job that
	// restarts while every slot is taken does not wait for one to free).
	if c.freeSlots(inUse, draining) == 0 {
		none := true
		read(func(st *fsm.State) {
			ready, _ := st.ReadyRegionsWithin(0)
			none = len(ready) == 0
		})
		if none {
			return Plan{NoFreeSlot: true}
		}
	}
	// The regions listed are those the free slots placement.Plan places
	// on could take (ReadyRegionsWithin), counted from the same slots in
	// use.
	execs := c.schedulable(draining)
	var ready, tooBig []fsm.ReadyRegion
	free := 0
	read(func(st *fsm.State) {
		var used []int
		for i := range execs {
			at := len(used)
			used = st.AppendUsedSlots(used, execs[i].ID)
			execs[i].Used = used[at:len(used):len(used)]
		}
		free = placement.FreeSlots(execs)
		ready, tooBig = st.ReadyRegionsWithin(free)
		if needsResources(ready) {
			inUse := st.ResourcesInUse()
			for i := range execs {
				execs[i].InUse = inUse[execs[i].ID]
			}
		}
	})
	plan := placement.Plan(offDraining(ready, draining), execs)
	var out Plan
	if free == 0 && len(plan) == 0 {
		return Plan{NoFreeSlot: true}
	}
	placed := make(map[Region]bool, len(plan))
	f := c.fenced(now)
	for _, p := range plan {
		out.Propose = append(out.Propose, p.Command(f.Token, f.Time))
		placed[Region{p.Job, p.Region}] = true
	}
	for _, r := range ready {
		if k := (Region{r.Job, r.Region}); !placed[k] {
			out.Waiting = append(out.Waiting, k)
		}
	}
	for _, r := range tooBig {
		out.Waiting = append(out.Waiting, Region{r.Job, r.Region})
	}
	return out
}

// needsResources reports whether a ready region declares resources (only
// then are those in use worth adding up).
func needsResources(ready []fsm.ReadyRegion) bool {
	for _, r := range ready {
		for _, k := range r.Keys {
			if !k.Resources.IsZero() {
				return true
			}
		}
	}
	return false
}

// offDraining leaves out the ready regions that would join a slot held on
// a draining executor: they wait until the holder has ended (at the
// drain's deadline at the latest), so a draining executor gets no new
// placement.
func offDraining(ready []fsm.ReadyRegion, draining map[string]bool) []fsm.ReadyRegion {
	if len(draining) == 0 {
		return ready
	}
	out := ready[:0:0]
	for _, r := range ready {
		ok := true
		for _, k := range r.Keys {
			if k.Held && draining[k.Executor] {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// Restarts proposes the restart of every job with a region whose restart
// delay has passed at now and whose executions have all ended. It also
// returns the earliest restart time of any restarting region (zero if none),
// so the caller knows when to ask again.
//
// A job restarts no sooner than MinRestartDelay after its latest failure;
// until then it is not due, and the time returned is when it will be.
func (c *Core) Restarts(read Reader, now time.Time) (Ready, time.Time) {
	var due []string
	var next int64
	nowMs, floor := now.UnixMilli(), c.cfg.MinRestartDelay.Milliseconds()
	read(func(st *fsm.State) {
		next = st.NextRestart()
		for _, j := range st.RestartsDue(nowMs) {
			if at := st.LastFailure(j) + floor; floor > 0 && at > nowMs {
				if next == 0 || next <= nowMs || at < next {
					next = at
				}
				continue
			}
			due = append(due, j)
		}
	})
	var r Ready
	for _, j := range due {
		r.Propose = append(r.Propose, &fsm.RestartRegions{Fenced: c.fenced(now), Job: j})
	}
	r.kickOnCommit = len(due) > 0
	var at time.Time
	if next != 0 {
		at = time.UnixMilli(next)
	}
	return r, at
}

// forgetBatch bounds the jobs one forget-jobs command forgets.
const forgetBatch = 1000

// Forget proposes forgetting the jobs that ended more than retention before
// now, a bounded batch at a time, and pruning tombstones as old: by then no
// executor still holds an execution of the forgotten job.
func (c *Core) Forget(read Reader, now time.Time, retention time.Duration) Ready {
	cutoff := now.Add(-retention).UnixMilli()
	var ids []string
	var tombs bool
	read(func(st *fsm.State) {
		ids = st.EndedBefore(cutoff, forgetBatch)
		oldest := st.OldestTombstone()
		tombs = oldest != 0 && oldest < cutoff
	})
	if len(ids) == 0 && !tombs {
		return Ready{}
	}
	return Ready{Propose: []fsm.Command{&fsm.ForgetJobs{Fenced: c.fenced(now), IDs: ids, PruneBefore: cutoff}}}
}
