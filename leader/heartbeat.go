package leader

import (
	"log/slog"
	"time"

	"jobmaster/fsm"
	"jobmaster/wire"
)

// Heartbeat is one heartbeat to send to an executor.
type Heartbeat struct {
	Executor string
	Addr     string
	// Ack is the terminal executions the executor may forget.
	Ack []string
	// Probe: the heartbeat must not renew the executor's lease.
	Probe bool
	// ProbeStarted: this is the first probe since the executor last
	// answered, and Silent how long it has not answered.
	ProbeStarted bool
	Silent       time.Duration
	// Base is the state's applied index and Sent the time when the
	// heartbeat was sent: its answer is reconciled as of then.
	Base uint64
	Sent time.Time
}

// Heartbeat prepares the heartbeat sent to an executor at now, taking the
// acks queued for it. It returns false if there is nothing to send to (the
// executor's address is not known yet). A heartbeat that gets no answer
// goes back with HeartbeatFailed, one that does with HeartbeatAnswered.
//
// Probe rule: a heartbeat is a probe when the executor has not answered for
// longer than timeout - lease - RPC timeout. Past that point a renewed
// lease could outlast the moment it is declared lost (requests may arrive
// while answers are lost), and its tasks would run beside their
// replacements. The lease is the executor's own or the configured one,
// whichever is longer.
func (c *Core) Heartbeat(read Reader, executor string, now time.Time) (Heartbeat, bool) {
	var base uint64
	read(func(st *fsm.State) { base = st.Index() })
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.execs[executor]
	if x == nil || x.addr == "" {
		return Heartbeat{}, false
	}
	probe := now.Sub(x.lastAnswer) > c.cfg.Timeout-max(x.lease, c.cfg.Lease)-c.cfg.RPCTimeout
	h := Heartbeat{Executor: executor, Addr: x.addr, Ack: x.acks, Probe: probe, ProbeStarted: probe && !x.probing,
		Silent: now.Sub(x.lastAnswer), Base: base, Sent: now}
	x.acks = nil
	x.probing = probe
	return h, true
}

// HeartbeatFailed takes back a heartbeat that got no answer: its acks go
// with the next one.
func (c *Core) HeartbeatFailed(h Heartbeat) {
	if len(h.Ack) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if x := c.execs[h.Executor]; x != nil {
		x.acks = append(h.Ack, x.acks...)
	}
}

// HeartbeatAnswered handles the answer to heartbeat h, received at now: the
// executor is alive and may take work, and its report is reconciled as of
// the time the heartbeat was sent (the report shows the executor as it was
// then). An executor that speaks another protocol version is not used. A
// report from another executor than the one heartbeated (gossip gave its
// name another's address) is no answer: the executor is not heard from,
// and nothing in the report is reconciled as its own.
func (c *Core) HeartbeatAnswered(read Reader, h Heartbeat, rep *wire.Report, now time.Time) Ready {
	if rep.Version != wire.Version {
		var r Ready
		r.event(slog.LevelError, "executor speaks another protocol version: not using it", "executor", h.Executor, "version", rep.Version, "want", wire.Version)
		return r
	}
	if rep.Executor != h.Executor {
		c.HeartbeatFailed(h)
		var r Ready
		if h.ProbeStarted {
			r.event(slog.LevelWarn, "another executor answers at this executor's address: it is not heard from", "executor", h.Executor, "addr", h.Addr, "answered_as", rep.Executor)
		}
		return r
	}
	c.mu.Lock()
	x := c.execs[h.Executor]
	if x == nil {
		c.mu.Unlock()
		return Ready{}
	}
	revived := !x.answered || x.status != Alive
	early := x.noteEarlyStops(rep.Executions)
	if !h.Probe {
		x.renewed = true
	}
	var change *Change
	if x.status != Alive {
		change = &Change{Executor: x.id, From: x.status, To: Alive, Silent: now.Sub(x.lastAnswer)}
	}
	x.answered = true
	x.lastAnswer = now
	x.status = Alive
	x.lostSent = false
	x.probing = false
	slots, fits := SlotsOf(rep.Slots)
	refused := !fits && x.refusedClaim != rep.Slots
	x.refusedClaim = 0
	if !fits {
		x.refusedClaim = rep.Slots
	}
	x.slots, x.used, x.instance = slots, rep.UsedSlots, rep.Instance
	lease := time.Duration(rep.LeaseMs) * time.Millisecond
	warn := lease > x.lease && c.cfg.MinTimeout(lease) > c.cfg.Timeout
	x.lease = lease
	storageErr := rep.StorageError
	if len(storageErr) > wire.MaxStorageError {
		storageErr = storageErr[:wire.MaxStorageError]
	}
	diskChanged, storageChanged := x.diskFull != rep.DiskFull, x.storageError != storageErr
	x.diskFull, x.storageError = rep.DiskFull, storageErr
	x.capacity = CapacityOf(rep.CPUMillis, rep.MemoryMB)
	c.mu.Unlock()

	r := c.report(read, h.Executor, rep.Executions, rep.Partitions, h.Base, h.Sent, now, false, early)
	if change != nil {
		r.Changes = append([]Change{*change}, r.Changes...)
	}
	if refused {
		r.event(slog.LevelWarn, "executor claims a slot count outside what an executor may have: it is counted with the nearest bound",
			"executor", h.Executor, "claimed", rep.Slots, "counted", slots, "max_slots", wire.MaxSlots)
	}
	if warn {
		r.event(slog.LevelError, "executor lease too long for --executor-timeout: its lease is renewed for too short a window, and a lost executor may outlive its replacement tasks",
			"executor", h.Executor, "lease", lease, "executor_timeout", c.cfg.Timeout, "needs_at_least", c.cfg.MinTimeout(lease))
	}
	switch {
	case diskChanged && rep.DiskFull:
		r.event(slog.LevelWarn, "executor disk full: no new work is placed there until it clears", "executor", h.Executor)
	case diskChanged:
		r.event(slog.LevelInfo, "executor disk no longer full: it takes work again", "executor", h.Executor)
		revived = true
	}
	if storageChanged && storageErr != "" {
		r.event(slog.LevelError, "executor cannot write its own files", "executor", h.Executor, "err", storageErr)
	}
	r.Kick = r.Kick || revived
	return r
}
