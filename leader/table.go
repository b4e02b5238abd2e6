package leader

import (
	"sort"
	"time"

	"jobmaster/api"
	"jobmaster/jobspec"
	"jobmaster/placement"
	"jobmaster/wire"
)

// executor is what the leader knows of one executor.
type executor struct {
	id       string
	addr     string
	slots    int
	used     int
	instance string
	// lease is the executor's own lease, from its reports (0 until known).
	lease time.Duration
	// gone: gossip says it left or failed.
	gone bool
	// answered: it answered a heartbeat in this session; only then is it
	// given work.
	answered   bool
	lastAnswer time.Time
	status     Status
	// lostSent: its loss was committed (or needed no command); reset when
	// it answers again.
	lostSent bool
	// refusedClaim is the slot count it last claimed beyond wire.MaxSlots
	// (logged once per claim), 0 when its claim is within the bound.
	refusedClaim int
	// probing: heartbeats to it are probes.
	probing bool
	// diskFull and storageError are what its last report said of its
	// disk: full (it takes no new work), and the failing writes of its
	// own files.
	diskFull     bool
	storageError string
	// capacity is what it offers for tasks' resources, from its reports
	// (zero until it reports one).
	capacity jobspec.Resources
	// acks are terminal executions to acknowledge with the next heartbeat.
	acks []string
	// cancelSent remembers the cancels sent because the state asked for
	// them (Cancels); reports repeat them while needed.
	cancelSent map[string]bool
	// renewed: it answered a heartbeat of this session that renewed its
	// lease; earlyStops: the executions it reported stopping or stopped
	// before that (noteEarlyStops), until their end is recorded.
	renewed    bool
	earlyStops map[string]bool
}

// Member is an executor as gossip knows it.
type Member struct {
	ID    string
	Addr  string // HTTP address
	Slots int
	// Gone: gossip says it left or failed; it takes no new work.
	Gone bool
	// Left: it left gossip, saying goodbye (a clean stop), rather than
	// failing.
	Left bool
}

// Refresh brings the table in step with gossip (members) and the state
// (withWork: the executors with live executions placed on them): it adds
// executors either knows of and drops those gone from both that are lost,
// and those that left gossip cleanly holding nothing (a stopped or
// decommissioned executor is not shown lost, nor counted so, for the half
// hour gossip remembers it). It returns the executors added and dropped,
// in id order; the caller starts and stops their heartbeats.
func (c *Core) Refresh(now time.Time, members []Member, withWork []string) (added, dropped []string) {
	work := make(map[string]bool, len(withWork))
	for _, id := range withWork {
		work[id] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]bool, len(members))
	left := make(map[string]bool)
	for _, mem := range members {
		seen[mem.ID] = true
		if mem.Left && !work[mem.ID] {
			left[mem.ID] = true
			if c.execs[mem.ID] == nil {
				continue // departed with nothing: not taken on
			}
		}
		x, isNew := c.ensure(mem.ID, now)
		if isNew {
			added = append(added, mem.ID)
		}
		x.addr = mem.Addr
		x.gone = mem.Gone
		if x.slots == 0 || !x.answered {
			x.slots, _ = SlotsOf(mem.Slots)
		}
	}
	for id := range work {
		if _, isNew := c.ensure(id, now); isNew {
			added = append(added, id)
		}
	}
	// An executor is dropped once gossip has forgotten it (membership reaps
	// dead members after a while) and nothing is expected of it; dropping
	// it while gossip still lists it would only bring it back, alive again,
	// with a fresh timeout.
	for id, x := range c.execs {
		if left[id] || !seen[id] && !work[id] && x.status == Lost {
			delete(c.execs, id)
			dropped = append(dropped, id)
		}
	}
	sort.Strings(added)
	sort.Strings(dropped)
	return added, dropped
}

// SlotsOf is how many slots the leader counts for an executor that claims
// claimed (in gossip or a report): the claim, held within 0 and
// wire.MaxSlots; ok is false when it had to be. Placement builds a list
// of free slots per executor, so a claim of 2e9 slots must not reach it.
func SlotsOf(claimed int) (slots int, ok bool) {
	switch {
	case claimed < 0:
		return 0, false
	case claimed > wire.MaxSlots:
		return wire.MaxSlots, false
	}
	return claimed, true
}

// ensure returns the executor's record, adding it if new. A new record's
// timeout starts now: a new leader gives every executor a full timeout.
func (c *Core) ensure(id string, now time.Time) (*executor, bool) {
	if x, ok := c.execs[id]; ok {
		return x, false
	}
	x := &executor{id: id, lastAnswer: now, status: Alive, cancelSent: make(map[string]bool)}
	c.execs[id] = x
	return x, true
}

// Known lists the executors in the table, in id order.
func (c *Core) Known() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.execs))
	for id := range c.execs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Addr is an executor's HTTP address, "" if unknown.
func (c *Core) Addr(executor string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if x := c.execs[executor]; x != nil {
		return x.addr
	}
	return ""
}

// QueueAcks queues acks for the executor's next heartbeat.
func (c *Core) QueueAcks(executor string, acks []string) {
	if len(acks) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if x := c.execs[executor]; x != nil {
		x.acks = append(x.acks, acks...)
	}
}

// takesWork: answering heartbeats of this session, with slots, not leaving
// gossip, its disk not full.
func (x *executor) takesWork() bool {
	return x.answered && x.status == Alive && x.slots > 0 && !x.gone && !x.diskFull
}

// schedulable lists the executors that may take new work, in no order
// (placement.Plan's choices do not depend on it), with their slots and
// capacity (the caller adds what is in use on each). A draining executor
// takes none.
func (c *Core) schedulable(draining map[string]bool) []placement.Executor {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]placement.Executor, 0, len(c.execs))
	for _, x := range c.execs {
		if x.takesWork() && !draining[x.id] {
			out = append(out, placement.Executor{ID: x.id, Slots: x.slots, Capacity: x.capacity})
		}
	}
	return out
}

// takesWork is whether executor id may take new work (as schedulable
// lists them).
func (c *Core) takesWork(id string, draining map[string]bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.execs[id]
	return x != nil && x.takesWork() && !draining[id]
}

// freeSlots counts the free slots of the executors that may take new work,
// given the number of slots in use on each.
func (c *Core) freeSlots(inUse map[string]int, draining map[string]bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	free := 0
	for _, x := range c.execs {
		if x.takesWork() && !draining[x.id] {
			free += max(0, x.slots-inUse[x.id])
		}
	}
	return free
}

// Executors lists the table for GET /v1/cluster at now, given the slot
// numbers in use on each executor and the drains (by executor: whether it
// is drained), with how long each has been silent. A draining executor
// that is drained and not lost shows the status drained. An
// executor that has not answered this session and
// that gossip says failed or left is shown lost at once (a new leader would
// otherwise show one lost before it took over as alive for a whole
// timeout), though only the timeout declares it lost. A lost executor
// offers no free slot.
func (c *Core) Executors(used map[string][]int, drains map[string]bool, now time.Time) []api.Executor {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]api.Executor, 0, len(c.execs))
	for _, x := range c.execs {
		st := x.status
		if !x.answered && x.gone {
			st = Lost
		}
		free := max(0, x.slots-len(used[x.id]))
		if st == Lost {
			free = 0
		}
		silent := max(0, now.Sub(x.lastAnswer).Milliseconds())
		drained, draining := drains[x.id]
		status := string(st)
		if drained && st != Lost {
			status = api.ExecutorDrained
		}
		out = append(out, api.Executor{ID: x.id, HTTPAddr: x.addr, Slots: x.slots, FreeSlots: free, Status: status, SilentMs: &silent,
			Draining: draining, DiskFull: x.diskFull, StorageError: x.storageError, CPUMillis: x.capacity.CPUMillis, MemoryMB: x.capacity.MemoryMB})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Status is an executor's liveness as the table has it, and whether the
// table knows the executor.
func (c *Core) Status(executor string) (Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if x := c.execs[executor]; x != nil {
		return x.status, true
	}
	return "", false
}

// CapacityOf is the capacity the leader counts for an executor that
// reports cpuMillis and memoryMB: each held within 0 and what one task may
// ask for (jobspec.MaxCPUMillis, MaxMemoryMB).
func CapacityOf(cpuMillis, memoryMB int64) jobspec.Resources {
	return jobspec.Resources{CPUMillis: min(max(cpuMillis, 0), jobspec.MaxCPUMillis), MemoryMB: min(max(memoryMB, 0), jobspec.MaxMemoryMB)}
}
