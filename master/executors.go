package master

import (
	"sync"
	"sync/atomic"
	"time"

	"jobmaster/fsm"
	"jobmaster/leader"
	"jobmaster/membership"
	"jobmaster/wire"
)

// tracker runs a session's executor-facing goroutines: it keeps the core's
// executor table in step with gossip and the state, ticks the core's
// liveness judgement, sends cancels as soon as the state asks for them, and
// heartbeats every executor from a goroutine of its own. What to do is the
// core's (package leader); the tracker gathers inputs and carries out the
// Ready it returns (carry.go).
//
// Goroutines: run (the table, ticks and cancels), waves (starts a heartbeat
// wave every interval), one heartbeatLoop per executor, and short-lived
// ones per deploy or cancel sent; all stop with the session, and wait
// waits for them.
type tracker struct {
	s    *session
	m    *Master
	core *leader.Core
	// outbox gathers the deployments to each executor while one is in
	// flight there (carry.go).
	outbox *leader.Outbox
	wg     sync.WaitGroup // every goroutine but run
	// wave is closed, and replaced, every heartbeat interval: every
	// executor's loop sends its heartbeat on it. Heartbeats sent together
	// keep the runtime awake for one burst a second instead of waking it
	// (timers, threads, network poller) for each executor at its own
	// moment, which cost the leader several times the heartbeat's own work.
	wave atomic.Pointer[chan struct{}]

	mu sync.Mutex
	// loops holds the stop channel of each executor's heartbeat loop.
	loops map[string]chan struct{}
	// started: run has begun, so new executors get a heartbeat loop at
	// once (before, the table is only filled).
	started bool
	// claims holds, per executor, the slot count beyond wire.MaxSlots its
	// gossip metadata last claimed, so that each claim is logged once.
	claims map[string]int
	// noBinary holds the executors that refused a deploy in binary (an
	// older version): they get JSON for the rest of the session.
	noBinary map[string]bool
	// failing holds, per executor whose last heartbeat failed, why: said
	// when it turns suspect or lost.
	failing map[string]string
}

// newTracker builds the session's core and fills its table from gossip and
// the state, so that the session's first /v1/cluster answer already lists
// every executor.
func newTracker(s *session) *tracker {
	now := s.m.cfg.Now()
	t := &tracker{s: s, m: s.m, core: leader.New(s.m.cfg.leaderConfig(), s.token, now), outbox: leader.NewOutbox(), loops: make(map[string]chan struct{}), claims: make(map[string]int), failing: make(map[string]string)}
	first := make(chan struct{})
	t.wave.Store(&first)
	t.refresh(now)
	return t
}

// read is the core's view of the replicated state.
func (t *tracker) read(fn func(*fsm.State)) { t.m.fsm.Read(fn) }

// run keeps the executor table in step with gossip and the state, ticks
// liveness, and sends cancels as soon as the state asks for them.
func (t *tracker) run() {
	cfg := &t.m.cfg
	t.mu.Lock()
	t.started = true
	for _, id := range t.core.Known() {
		t.startLoopLocked(id)
	}
	t.mu.Unlock()
	t.refresh(cfg.Now())
	t.wg.Add(1)
	go t.waves()
	tick := time.NewTicker(cfg.ExecutorHeartbeat / 4)
	defer tick.Stop()
	// Each channel is taken again only once it has fired, before the
	// work it asks for: a change made while another case's work runs (a
	// tick's executor-lost cancels the rest of a region; a drain moves
	// work) closes the channel held, and is seen at the next turn rather
	// than at the next unrelated change.
	gossipChanged := t.m.gossip.Changed()
	fsmChanged := t.m.fsm.Changed()
	for {
		select {
		case <-t.s.ctx.Done():
			t.mu.Lock()
			for id, stop := range t.loops {
				close(stop)
				delete(t.loops, id)
			}
			t.mu.Unlock()
			return
		case <-gossipChanged:
			gossipChanged = t.m.gossip.Changed()
			t.refresh(cfg.Now())
		case <-fsmChanged:
			fsmChanged = t.m.fsm.Changed()
			t.carry(t.core.Cancels(t.read), sendEach)
		case <-tick.C:
			now := cfg.Now()
			t.refresh(now)
			t.carry(t.core.Tick(t.read, now), sendEach)
			if r := t.core.Drains(t.read, now); len(r.Propose) > 0 {
				t.carry(r, sendEach)
			}
		}
	}
}

func (t *tracker) wait() { t.wg.Wait() }

// waves starts a heartbeat wave every heartbeat interval.
func (t *tracker) waves() {
	defer t.wg.Done()
	tick := time.NewTicker(t.m.cfg.ExecutorHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-t.s.ctx.Done():
			return
		case <-tick.C:
			next := make(chan struct{})
			close(*t.wave.Swap(&next))
		}
	}
}

// noteSlotClaim logs, once per claim, an executor whose gossip metadata
// claims more slots than an executor may have (the core counts it with
// wire.MaxSlots).
func (t *tracker) noteSlotClaim(id string, claimed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if counted, ok := leader.SlotsOf(claimed); !ok {
		if t.claims[id] != claimed {
			t.m.log.Warn("executor's gossip claims a slot count outside what an executor may have: it is counted with the nearest bound",
				"executor", id, "claimed", claimed, "counted", counted, "max_slots", wire.MaxSlots)
		}
		t.claims[id] = claimed
		return
	}
	delete(t.claims, id)
}

// refresh hands the core what gossip and the state know of executors, and
// starts and stops heartbeat loops for the executors it adds and drops.
func (t *tracker) refresh(now time.Time) {
	gossip := t.m.gossip.Role(membership.RoleExecutor)
	members := make([]leader.Member, len(gossip))
	for i, mem := range gossip {
		gone := mem.Status == membership.StatusLeft || mem.Status == membership.StatusDead
		members[i] = leader.Member{ID: mem.ID, Addr: mem.Meta.HTTPAddr, Slots: mem.Meta.Slots, Gone: gone, Left: mem.Status == membership.StatusLeft}
		t.noteSlotClaim(mem.ID, mem.Meta.Slots)
	}
	var withWork []string
	t.read(func(st *fsm.State) { withWork = st.ExecutorsWithWork() })
	added, dropped := t.core.Refresh(now, members, withWork)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range dropped {
		if stop, ok := t.loops[id]; ok {
			close(stop)
			delete(t.loops, id)
		}
		delete(t.failing, id)
	}
	if t.started {
		for _, id := range added {
			t.startLoopLocked(id)
		}
	}
}

func (t *tracker) startLoopLocked(id string) {
	if _, ok := t.loops[id]; ok {
		return
	}
	stop := make(chan struct{})
	t.loops[id] = stop
	t.wg.Add(1)
	go t.heartbeatLoop(id, stop)
}

// heartbeatLoop heartbeats one executor at once, then with every wave.
func (t *tracker) heartbeatLoop(id string, stop <-chan struct{}) {
	defer t.wg.Done()
	t.heartbeat(id)
	for {
		wave := *t.wave.Load()
		select {
		case <-t.s.ctx.Done():
			return
		case <-stop:
			return
		case <-wave:
		}
		t.heartbeat(id)
	}
}
