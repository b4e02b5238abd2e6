package master

import (
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/membership"
	"jobmaster/placement"
	"jobmaster/reconcile"
	"jobmaster/wire"
)

// tracker is the leader's deployment tracker: it knows every executor,
// heartbeats each from its own goroutine, reconciles every report against
// the expected set in the FSM, deploys and cancels, and declares executors
// lost. It is rebuilt from the FSM and gossip at every leadership change, so
// a new leader adopts what runs instead of restarting it.
type tracker struct {
	s  *session
	m  *Master
	wg sync.WaitGroup // heartbeat loops and RPCs in flight
	// wave is closed, and replaced, every heartbeat interval: every
	// executor's loop sends its heartbeat on it. Heartbeats sent together
	// keep the runtime awake for one burst a second instead of waking it
	// (timers, threads, network poller) for each executor at its own
	// moment, which cost the leader several times the heartbeat's own work.
	wave atomic.Pointer[chan struct{}]

	mu    sync.Mutex
	execs map[string]*trackedExecutor
	// started: run has begun, so new executors get a heartbeat loop at
	// once (before, newTracker only fills the table).
	started bool
}

// trackedExecutor is what the leader knows of one executor.
type trackedExecutor struct {
	id       string
	addr     string
	slots    int
	used     int
	instance string
	// lease is the executor's own lease, from its reports (0 until known).
	lease  time.Duration
	gossip string // gossip status
	// answered: it answered a heartbeat in this session; only then is it
	// given work.
	answered   bool
	lastAnswer time.Time
	status     string
	// lostSent: its loss was committed; reset when it answers again.
	lostSent bool
	// acks are terminal executions to acknowledge with the next heartbeat.
	acks []string
	// cancelSent remembers cancels sent on an FSM change; heartbeats repeat
	// them while needed.
	cancelSent map[string]bool
	stop       chan struct{}
}

// newTracker builds the tracker and fills its table from gossip and the
// FSM, so that the session's first /v1/cluster answer already lists every
// executor.
func newTracker(s *session) *tracker {
	t := &tracker{s: s, m: s.m, execs: make(map[string]*trackedExecutor)}
	first := make(chan struct{})
	t.wave.Store(&first)
	t.refresh(s.m.cfg.Now())
	return t
}

// leader is what every request to an executor carries.
func (t *tracker) leader() wire.Leader {
	return wire.Leader{Version: wire.Version, Cluster: t.s.cluster, Token: t.s.token, Node: t.m.cfg.NodeID, Addr: t.m.httpAddr}
}

// run keeps the executor table in step with gossip and the FSM, judges
// liveness, and sends cancels as soon as the FSM asks for them.
func (t *tracker) run() {
	cfg := &t.m.cfg
	t.mu.Lock()
	t.started = true
	for _, x := range t.execs {
		t.startLoop(x)
	}
	t.mu.Unlock()
	t.refresh(cfg.Now())
	t.wg.Add(1)
	go t.waves()
	tick := time.NewTicker(cfg.ExecutorHeartbeat / 4)
	defer tick.Stop()
	last := cfg.Now()
	for {
		gossipChanged := t.m.gossip.Changed()
		fsmChanged := t.m.fsm.Changed()
		select {
		case <-t.s.ctx.Done():
			t.mu.Lock()
			for _, x := range t.execs {
				close(x.stop)
			}
			t.mu.Unlock()
			return
		case <-gossipChanged:
			t.refresh(cfg.Now())
		case <-fsmChanged:
			t.sendCancels()
		case <-tick.C:
			now := cfg.Now()
			if now.Sub(last) > 3*cfg.ExecutorHeartbeat {
				// This process was paused (or starved): executors could not
				// have answered, so their silence proves nothing.
				t.m.log.Warn("leader was paused; restarting executor timeouts", "gap", now.Sub(last))
				t.graceAll(now)
			}
			last = now
			t.refresh(now)
			t.checkLiveness(now)
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

func (t *tracker) graceAll(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, x := range t.execs {
		if x.lastAnswer.Before(now) {
			x.lastAnswer = now
		}
	}
}

// refresh adds executors that gossip or the FSM knows of and drops those
// that are gone from both.
func (t *tracker) refresh(now time.Time) {
	members := t.m.gossip.Role(membership.RoleExecutor)
	var withWork []string
	t.m.fsm.Read(func(st *fsm.State) { withWork = st.ExecutorsWithWork() })
	work := make(map[string]bool, len(withWork))
	for _, id := range withWork {
		work[id] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := make(map[string]bool, len(members))
	for _, mem := range members {
		seen[mem.ID] = true
		x := t.ensure(mem.ID, now)
		x.addr = mem.Meta.HTTPAddr
		x.gossip = mem.Status
		if x.slots == 0 || !x.answered {
			x.slots = mem.Meta.Slots
		}
	}
	for id := range work {
		t.ensure(id, now)
	}
	// An executor is dropped once gossip has forgotten it (membership reaps
	// dead members after a while) and nothing is expected of it; dropping
	// it while gossip still lists it would only bring it back, alive again,
	// with a fresh timeout.
	for id, x := range t.execs {
		if !seen[id] && !work[id] && x.status == reconcile.Lost {
			close(x.stop)
			delete(t.execs, id)
		}
	}
}

// ensure returns the tracked executor, starting its heartbeat loop if new.
// Its timeout starts now: a new leader gives every executor a full timeout.
func (t *tracker) ensure(id string, now time.Time) *trackedExecutor {
	if x, ok := t.execs[id]; ok {
		return x
	}
	x := &trackedExecutor{id: id, lastAnswer: now, status: reconcile.Alive, cancelSent: make(map[string]bool),
		stop: make(chan struct{})}
	t.execs[id] = x
	if t.started {
		t.startLoop(x)
	}
	return x
}

func (t *tracker) startLoop(x *trackedExecutor) {
	t.wg.Add(1)
	go t.heartbeatLoop(x)
}

func (t *tracker) checkLiveness(now time.Time) {
	cfg := &t.m.cfg
	var lost []string
	t.mu.Lock()
	for _, x := range t.execs {
		st := reconcile.Liveness(now, x.lastAnswer, cfg.ExecutorHeartbeat, cfg.ExecutorTimeout)
		if st != x.status {
			t.m.log.Info("executor status", "executor", x.id, "from", x.status, "to", st, "silent_for", now.Sub(x.lastAnswer).Round(time.Millisecond))
			x.status = st
		}
		if st == reconcile.Lost && !x.lostSent {
			lost = append(lost, x.id)
		}
	}
	t.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	sort.Strings(lost)
	var withWork map[string]bool
	t.m.fsm.Read(func(st *fsm.State) {
		withWork = make(map[string]bool)
		for _, id := range st.ExecutorsWithWork() {
			withWork[id] = true
		}
	})
	var cmds []fsm.Command
	for _, id := range lost {
		if withWork[id] {
			cmds = append(cmds, &fsm.ExecutorLost{Fenced: t.s.fenced(), Executor: id})
		}
	}
	if len(cmds) > 0 {
		if _, err := t.s.propose(cmds...); err != nil {
			t.m.log.Warn("executor lost: proposal failed", "err", err)
			return
		}
		t.m.log.Warn("executors lost: their executions failed", "executors", lost)
		t.s.kick()
	}
	t.mu.Lock()
	for _, id := range lost {
		if x := t.execs[id]; x != nil {
			x.lostSent = true
		}
	}
	t.mu.Unlock()
}

func (t *tracker) heartbeatLoop(x *trackedExecutor) {
	defer t.wg.Done()
	t.heartbeat(x)
	for {
		wave := *t.wave.Load()
		select {
		case <-t.s.ctx.Done():
			return
		case <-x.stop:
			return
		case <-wave:
		}
		t.heartbeat(x)
	}
}

// heartbeat sends one heartbeat and reconciles the answer.
func (t *tracker) heartbeat(x *trackedExecutor) {
	cfg := &t.m.cfg
	sent := cfg.Now()
	t.mu.Lock()
	addr, acks := x.addr, x.acks
	x.acks = nil
	probe := mustProbe(sent, x.lastAnswer, max(x.lease, cfg.ExecutorLease), cfg)
	t.mu.Unlock()
	if addr == "" {
		return
	}
	var base uint64
	t.m.fsm.Read(func(st *fsm.State) { base = st.Index() })
	var rep wire.Report
	req := wire.HeartbeatRequest{Leader: t.leader(), Ack: acks, Probe: probe}
	err := postJSON(t.s.ctx, t.m.client, addr, wire.PathHeartbeat, req, &rep, cfg.heartbeatRPCTimeout())
	if err != nil {
		t.mu.Lock()
		x.acks = append(acks, x.acks...)
		t.mu.Unlock()
		if errors.Is(err, errFencedOff) {
			t.m.log.Warn("executor refuses this leader's token", "executor", x.id, "err", err)
		}
		return
	}
	if rep.Version != wire.Version {
		t.m.log.Error("executor speaks another protocol version: not using it", "executor", x.id, "version", rep.Version, "want", wire.Version)
		return
	}
	now := t.m.cfg.Now()
	t.mu.Lock()
	revived := !x.answered || x.status != reconcile.Alive
	x.answered = true
	x.lastAnswer = now
	x.status = reconcile.Alive
	x.lostSent = false
	x.slots, x.used, x.instance = rep.Slots, rep.UsedSlots, rep.Instance
	lease := time.Duration(rep.LeaseMs) * time.Millisecond
	warn := lease > x.lease && cfg.minExecutorTimeout(lease) > cfg.ExecutorTimeout
	x.lease = lease
	t.mu.Unlock()
	if warn {
		t.m.log.Error("executor lease too long for --executor-timeout: its lease is renewed for too short a window, and a lost executor may outlive its replacement tasks",
			"executor", x.id, "lease", lease, "executor_timeout", cfg.ExecutorTimeout, "needs_at_least", cfg.minExecutorTimeout(lease))
	}
	if revived {
		t.s.kick()
	}
	more := t.handleReport(x.id, rep.Executions, base, sent, false)
	if len(more) > 0 {
		t.mu.Lock()
		x.acks = append(x.acks, more...)
		t.mu.Unlock()
	}
}

// mustProbe reports whether a heartbeat sent at now must be a probe, which
// does not renew the executor's lease: the executor has not answered for
// longer than timeout - lease - RPC timeout. Past that point a renewed lease
// could outlast the moment it is declared lost (requests may arrive while
// answers are lost), and its tasks would run beside their replacements.
func mustProbe(now, lastAnswer time.Time, lease time.Duration, cfg *Config) bool {
	return now.Sub(lastAnswer) > cfg.ExecutorTimeout-lease-cfg.heartbeatRPCTimeout()
}

// handleReport reconciles a report (or a push, or a deploy answer: partial)
// taken at asOf, and carries out the result. It returns the terminal
// executions the executor may forget.
func (t *tracker) handleReport(executor string, reported []wire.ExecutionStatus, base uint64, asOf time.Time, partial bool) []string {
	cfg := &t.m.cfg
	var expected []fsm.Execution
	if partial {
		// Nothing can be missing from a partial report: only the
		// executions it names need comparing, not all the executor's.
		ids := make([]string, len(reported))
		for i := range reported {
			ids[i] = reported[i].ExecutionID
		}
		t.m.fsm.Read(func(st *fsm.State) { expected = st.ExpectedAmong(executor, ids) })
	} else {
		t.m.fsm.Read(func(st *fsm.State) { expected = st.Expected(executor) })
	}
	now := cfg.Now().UnixMilli()
	res := reconcile.Reconcile(reconcile.Input{
		Executor: executor, Expected: expected, Reported: reported, Partial: partial,
		BaseIndex: base, Now: asOf.UnixMilli(), AckDeadline: cfg.DeployTimeout,
	})
	if res.Empty() {
		return nil
	}
	acks := res.Ack
	if cmds := reconcile.Commands(executor, res, t.s.token, now, cfg.DeployTimeout); len(cmds) > 0 {
		rs, err := t.s.propose(cmds...)
		if err != nil {
			t.m.log.Debug("recording report failed", "executor", executor, "err", err)
			return acks
		}
		for _, r := range rs {
			acks = append(acks, r.Terminal...)
		}
		if len(res.Missing)+len(res.Expired) > 0 {
			t.m.log.Warn("executions failed", "executor", executor, "missing", res.Missing, "expired", res.Expired)
		}
		t.s.kick()
	}
	if len(res.Cancel) > 0 {
		t.m.log.Info("cancelling executions", "executor", executor, "ids", res.Cancel)
		t.sendCancel(executor, res.Cancel)
	}
	if len(res.Redeploy) > 0 {
		var tasks []fsm.TaskSpec
		t.m.fsm.Read(func(st *fsm.State) {
			for _, id := range res.Redeploy {
				if ts, ok := st.TaskSpec(id); ok {
					tasks = append(tasks, ts)
				}
			}
		})
		acks = append(acks, t.sendDeploy(executor, tasks)...)
	}
	return acks
}

// handlePush reconciles a state change an executor pushed.
func (t *tracker) handlePush(rep *wire.Report) []string {
	return t.handleReport(rep.Executor, rep.Executions, 0, t.m.cfg.Now(), true)
}

func (t *tracker) addr(executor string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if x := t.execs[executor]; x != nil {
		return x.addr
	}
	return ""
}

// deploy sends placed executions to their executors, one request per
// executor, concurrently.
func (t *tracker) deploy(byExecutor map[string][]fsm.TaskSpec) {
	for ex, tasks := range byExecutor {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			acks := t.sendDeploy(ex, tasks)
			t.queueAcks(ex, acks)
		}()
	}
}

func (t *tracker) queueAcks(executor string, acks []string) {
	if len(acks) == 0 {
		return
	}
	t.mu.Lock()
	if x := t.execs[executor]; x != nil {
		x.acks = append(x.acks, acks...)
	}
	t.mu.Unlock()
}

// sendDeploy deploys tasks on an executor; its answer acknowledges them.
func (t *tracker) sendDeploy(executor string, tasks []fsm.TaskSpec) []string {
	addr := t.addr(executor)
	if addr == "" || len(tasks) == 0 {
		return nil
	}
	wt := make([]wire.Task, len(tasks))
	for i, ts := range tasks {
		e := &ts.Execution
		wt[i] = wire.Task{ExecutionID: e.ID, JobID: e.Job, Vertex: e.Vertex, Subtask: e.Subtask,
			Parallelism: ts.Parallelism, Attempt: e.Attempt, Slot: e.Slot, Command: ts.Command, Env: ts.Env}
	}
	req := wire.NewDeployRequest(t.leader(), wt)
	var resp wire.DeployResponse
	if err := postJSON(t.s.ctx, t.m.client, addr, wire.PathDeploy, req, &resp, 10*time.Second); err != nil {
		t.m.log.Warn("deploy failed; the reconciler retries it", "executor", executor, "tasks", len(tasks), "err", err)
		return nil
	}
	return t.handleReport(executor, resp.Executions, 0, t.m.cfg.Now(), true)
}

func (t *tracker) sendCancel(executor string, ids []string) {
	addr := t.addr(executor)
	if addr == "" {
		return
	}
	err := postJSON(t.s.ctx, t.m.client, addr, wire.PathCancel, wire.CancelRequest{Leader: t.leader(), IDs: ids}, nil, 5*time.Second)
	if err != nil {
		t.m.log.Debug("cancel failed; the reconciler retries it", "executor", executor, "err", err)
	}
}

// sendCancels sends a cancel for every execution the FSM has just marked
// CANCELING, without waiting for the next heartbeat.
func (t *tracker) sendCancels() {
	var canceling map[string][]string
	t.m.fsm.Read(func(st *fsm.State) { canceling = st.Canceling() })
	t.mu.Lock()
	todo := make(map[string][]string)
	for _, x := range t.execs {
		ids := canceling[x.id]
		now := make(map[string]bool, len(ids))
		for _, id := range ids {
			now[id] = true
			if !x.cancelSent[id] {
				todo[x.id] = append(todo[x.id], id)
			}
		}
		x.cancelSent = now
	}
	t.mu.Unlock()
	for ex, ids := range todo {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.sendCancel(ex, ids)
		}()
	}
}

// schedulable lists executors that may take new work: answering heartbeats,
// with slots, not leaving gossip.
func (t *tracker) schedulable(used map[string][]int) []placement.Executor {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]placement.Executor, 0, len(t.execs))
	for _, x := range t.execs {
		if x.takesWork() {
			out = append(out, placement.Executor{ID: x.id, Slots: x.slots, Used: used[x.id]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// freeSlots counts the free slots of the executors that may take new work,
// given the number of slots in use on each.
func (t *tracker) freeSlots(inUse map[string]int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	free := 0
	for _, x := range t.execs {
		if x.takesWork() {
			free += max(0, x.slots-inUse[x.id])
		}
	}
	return free
}

// takesWork: answering heartbeats, with slots, not leaving gossip.
func (x *trackedExecutor) takesWork() bool {
	return x.answered && x.status == reconcile.Alive && x.slots > 0 && x.gossip != membership.StatusLeft && x.gossip != membership.StatusDead
}

// view lists executors for /v1/cluster.
func (t *tracker) view(used map[string][]int) []api.Executor {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]api.Executor, 0, len(t.execs))
	for _, x := range t.execs {
		out = append(out, api.Executor{ID: x.id, HTTPAddr: x.addr, Slots: x.slots, FreeSlots: max(0, x.slots-len(used[x.id])), Status: x.status})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
