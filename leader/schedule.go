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
	// free slot, and none of them could join slots its job holds: nothing
	// was placed.
	NoFreeSlot bool
	// Waiting is the ready regions the plan could not place.
	Waiting []Region
}

// Schedule places the ready regions that fit onto the executors that take
// work (placement.Plan), at now.
func (c *Core) Schedule(read Reader, now time.Time) Plan {
	// Without a free slot only the regions that need none (every key held
	// by its job) can be placed: queued jobs cost a count per executor and
	// a look for those, not a pass (with thousands queued, listing and
	// ordering them on every submission took half the leader's CPU).
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
	if c.freeSlots(inUse, draining) == 0 {
		return c.scheduleJoining(read, draining, now)
	}
	// The regions listed are those the free slots placement.Plan places
	// on could take (ReadyRegionsWithin), counted from the same slots in
	// use.
	execs := c.schedulable(draining)
	var ready, tooBig []fsm.ReadyRegion
	read(func(st *fsm.State) {
		var used []int
		for i := range execs {
			at := len(used)
			used = st.AppendUsedSlots(used, execs[i].ID)
			execs[i].Used = used[at:len(used):len(used)]
		}
		ready, tooBig = st.ReadyRegionsWithin(placement.FreeSlots(execs))
		if needsResources(ready) {
			addInUse(st, execs)
		}
	})
	return c.planned(placement.PlanBy(c.cfg.Placement, onTakers(ready, inList(execs)), execs), ready, tooBig, now)
}

// scheduleJoining is a pass while no executor that takes work has a free
// slot: it places the ready regions whose every key is held by their job
// on an executor that takes work (a region of a running job restarted
// while every slot is taken does not wait for one to free), and no other.
func (c *Core) scheduleJoining(read Reader, draining map[string]bool, now time.Time) Plan {
	var ready []fsm.ReadyRegion
	read(func(st *fsm.State) {
		listed, _ := st.ReadyRegionsWithin(0)
		for _, r := range listed {
			if allHeld(r) {
				ready = append(ready, r)
			}
		}
	})
	// Their holders are looked up one by one: the executors are listed
	// only when a region can go.
	if ready = onTakers(ready, func(id string) bool { return c.takesWork(id, draining) }); len(ready) == 0 {
		return Plan{NoFreeSlot: true}
	}
	execs := c.schedulable(draining)
	for i := range execs {
		execs[i].Slots = 0 // none is free: Plan hands none out
	}
	if needsResources(ready) {
		read(func(st *fsm.State) { addInUse(st, execs) })
	}
	plan := placement.PlanBy(c.cfg.Placement, ready, execs)
	if len(plan) == 0 {
		return Plan{NoFreeSlot: true}
	}
	return c.planned(plan, ready, nil, now)
}

// planned is the pass's Plan: plan's placements to propose at now, and
// the regions of ready and tooBig it did not place, waiting.
func (c *Core) planned(plan []placement.Placement, ready, tooBig []fsm.ReadyRegion, now time.Time) Plan {
	var out Plan
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

// addInUse sets what the live executions on each of execs need.
func addInUse(st *fsm.State, execs []placement.Executor) {
	inUse := st.ResourcesInUse()
	for i := range execs {
		execs[i].InUse = inUse[execs[i].ID]
	}
}

// allHeld reports whether every key of r is held by its job.
func allHeld(r fsm.ReadyRegion) bool {
	for _, k := range r.Keys {
		if !k.Held {
			return false
		}
	}
	return true
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

// onTakers leaves out the ready regions that would join a slot held on an
// executor that takes no new work (takes false): one that drains, whose
// disk is full, that has not answered this session, that is lost or gone.
// They wait until it takes work again or the holder has ended (for a
// draining executor, at the drain's deadline at the latest), so such an
// executor gets no new placement.
func onTakers(ready []fsm.ReadyRegion, takes func(executor string) bool) []fsm.ReadyRegion {
	out := ready[:0:0]
	for _, r := range ready {
		ok := true
		for _, k := range r.Keys {
			if k.Held && !takes(k.Executor) {
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

// inList is whether an executor is among execs, as onTakers asks (the set
// made when first asked).
func inList(execs []placement.Executor) func(string) bool {
	var set map[string]bool
	return func(id string) bool {
		if set == nil {
			set = make(map[string]bool, len(execs))
			for _, e := range execs {
				set[e.ID] = true
			}
		}
		return set[id]
	}
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
