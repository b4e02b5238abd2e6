package scenario

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"jobmaster/fsm"
	"jobmaster/leader"
	"jobmaster/wire"
)

// defaultConfig is the leader's timing unless a scenario's config command
// says otherwise. Simulated requests arrive when they are sent, so the
// heartbeat request timeout is 0. The lease a leader assumes (the masters'
// --executor-lease) is the longest of the executors' (add-executor lease=).
var defaultConfig = leader.Config{Heartbeat: time.Second, Timeout: 10 * time.Second, AckDeadline: 5 * time.Second}

// startTime is where every scenario's virtual clock starts.
var startTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// cluster simulates, deterministically and in memory, the replicated state,
// the leader and the executors. The leader is package leader's Core, the
// one package master runs: every decision (placement, reconciliation,
// liveness, probes, restarts, cancels) is the production one, and the
// harness carries out each Ready in the order package master does
// (carry). Every command goes through the FSM's codec in a log entry of
// its own index.
//
// Each leader's session has a Core of its own (cores, by fencing token): a
// command with token=N plays a goroutine of an earlier leader still at
// work, with that leader's memory. What the harness adds is the world: the
// executors, the network between them and the leader, and the clock.
type cluster struct {
	cfg   leader.Config
	state *fsm.State
	now   time.Time
	// leader and token are the current leader and its fencing token; core
	// is its session's core and cores every session's, by token.
	leader string
	token  uint64
	core   *leader.Core
	cores  map[uint64]*leader.Core
	execs  map[string]*simExecutor
	specs  map[string]string
	out    *output
	inv    *invariants
	// applying guards against cancels being handled inside an apply.
	applying bool
}

func newCluster() *cluster {
	return &cluster{
		cfg:   defaultConfig,
		state: fsm.NewState(),
		now:   startTime,
		cores: map[uint64]*leader.Core{},
		execs: map[string]*simExecutor{},
		specs: map[string]string{},
		out:   &output{},
		inv:   newInvariants(),
	}
}

func (c *cluster) nowMs() int64 { return c.now.UnixMilli() }

// read is the cores' view of the replicated state.
func (c *cluster) read(fn func(*fsm.State)) { fn(c.state) }

// elapsed formats the virtual time since the start: "t=12.5s".
func (c *cluster) elapsed() string {
	return "t=" + seconds(c.now.Sub(startTime))
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// executorIDs lists the simulated executors in id order.
func (c *cluster) executorIDs() []string {
	ids := make([]string, 0, len(c.execs))
	for id := range c.execs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// apply commits one log entry holding the commands and prints each with its
// outcome, then every job status that changed. Then the current leader
// sends the cancels the entry asked for, as package master does on every
// change of the state.
func (c *cluster) apply(cmds ...fsm.Command) []fsm.Result {
	before := map[string]fsm.JobStatus{}
	for _, j := range c.state.Jobs() {
		before[j.ID] = j.Status
	}
	index := c.state.Index() + 1
	res := c.state.ApplyEntry(index, fsm.MustEncode(cmds...))
	if len(res) != len(cmds) {
		panic(fmt.Sprintf("entry %d: %d commands, %d results: %v", index, len(cmds), len(res), res))
	}
	for i, cmd := range cmds {
		c.out.printf("%s", describe(cmd, res[i]))
		if lost, ok := cmd.(*fsm.ExecutorLost); ok && res[i].Err == nil {
			if e := c.execs[lost.Executor]; e != nil {
				e.lostAt = index
				c.inv.checkLoss(c, e)
			}
		}
	}
	for _, j := range c.state.Jobs() {
		old, ok := before[j.ID]
		if ok && old == j.Status {
			continue
		}
		line := fmt.Sprintf("job %s: %s -> %s", j.ID, old, j.Status)
		if !ok {
			line = fmt.Sprintf("job %s: %s", j.ID, j.Status)
		}
		if v, _ := c.state.Job(j.ID); v.Message != "" && showMessage(old, j.Status) {
			line += " (" + v.Message + ")"
		}
		c.out.printf("%s", line)
	}
	c.inv.observeState(c)
	if c.core != nil && !c.applying {
		c.applying = true
		c.carry(c.core, c.core.Cancels(c.read))
		c.applying = false
	}
	return res
}

// showMessage: a job's message explains a restart or a failure; it is shown
// once, when the job enters the status it explains.
func showMessage(old, now fsm.JobStatus) bool {
	switch now {
	case fsm.JobRestarting, fsm.JobFailing:
		return true
	case fsm.JobFailed:
		return old != fsm.JobFailing
	}
	return false
}

func (c *cluster) fenced(token uint64) fsm.Fenced { return fsm.Fenced{Token: token, Time: c.nowMs()} }

// coreOf is the core of the session whose token is token.
func (c *cluster) coreOf(token uint64) (*leader.Core, error) {
	core, ok := c.cores[token]
	if !ok {
		return nil, fmt.Errorf("no leader with token %d", token)
	}
	return core, nil
}

// carry carries out a Ready of core as package master does (master/carry.go):
// propose, complete with the results (or keep only what needs no commit
// when the proposal is refused), print the liveness changes, send the
// cancels and the deployments. It returns the acks for the executor the
// Ready is about. Deployments are put in flight; their answers come with
// deliver.
func (c *cluster) carry(core *leader.Core, r leader.Ready) []string {
	if core == c.core {
		for _, ch := range r.Changes {
			c.out.printf("%s: %s -> %s", ch.Executor, ch.From, ch.To)
		}
	}
	if len(r.Propose) > 0 {
		c.checkRecord(r)
		res := c.apply(r.Propose...)
		if staleToken(res) {
			r = leader.Failed(r)
		} else {
			r = core.Committed(c.read, r, res)
		}
	}
	for _, x := range r.Cancel {
		if e := c.execs[x.Executor]; e != nil {
			for _, id := range x.IDs {
				c.cancelOn(e, id, core.Token())
			}
		}
	}
	for _, d := range r.Deploy {
		c.sendDeploy(d, core.Token())
	}
	for _, x := range r.Release {
		if e := c.execs[x.Executor]; e != nil {
			c.releaseOn(e, x.IDs, core.Token())
		}
	}
	return r.Ack
}

// staleToken: the FSM refused a command for its token, which package
// master's session treats as a failed proposal (a newer leader exists).
func staleToken(res []fsm.Result) bool {
	for _, r := range res {
		if errors.Is(r.Err, fsm.ErrStaleToken) {
			return true
		}
	}
	return false
}

// checkRecord hands the invariants what a Ready is about to record.
func (c *cluster) checkRecord(r leader.Ready) {
	e := c.execs[r.Executor]
	if e == nil {
		return
	}
	for _, cmd := range r.Propose {
		if rep, ok := cmd.(*fsm.ReportExecutions); ok {
			c.inv.checkRecord(c, e, rep.Updates)
		}
	}
}

// establish commits establish-leadership for node: the entry's index is the
// new fencing token. The new leader's core knows nothing but the state and
// gossip (every executor): it counts them alive from now, and gives work
// only to those that have answered one of its heartbeats.
func (c *cluster) establish(node string) {
	r := c.apply(&fsm.EstablishLeadership{Node: node})
	c.leader, c.token = node, r[0].Epoch
	c.core = leader.New(c.cfg, c.token, c.now)
	c.cores[c.token] = c.core
	c.refresh()
}

// refresh hands the current core what gossip (every simulated executor,
// always alive there) and the state know of executors.
func (c *cluster) refresh() {
	if c.core == nil {
		return
	}
	members := make([]leader.Member, 0, len(c.execs))
	for _, id := range c.executorIDs() {
		members = append(members, leader.Member{ID: id, Addr: id, Slots: c.execs[id].slots})
	}
	c.core.Refresh(c.now, members, c.state.ExecutorsWithWork())
}

// schedule runs the core's scheduling pass of the leader with this token:
// the placements are committed in one entry and the deployments sent.
func (c *cluster) schedule(token uint64) error {
	core, err := c.coreOf(token)
	if err != nil {
		return err
	}
	plan := core.Schedule(c.read, c.now)
	switch {
	case plan.NoFreeSlot:
		c.out.printf("no free slot: the ready regions wait")
	case len(plan.Propose) == 0 && len(plan.Waiting) == 0:
		c.out.printf("nothing to place")
	}
	c.carry(core, plan.Ready)
	for _, r := range plan.Waiting {
		c.out.printf("%s region=%d waits: not enough free slots", r.Job, r.Region)
	}
	return nil
}

// sendDeploy puts a deploy request in flight, one message per task.
func (c *cluster) sendDeploy(d leader.Deploy, token uint64) {
	e := c.execs[d.Executor]
	if e == nil {
		return
	}
	ids := make([]string, 0, len(d.Tasks))
	for _, ts := range d.Tasks {
		x := &ts.Execution
		e.post(deployMsg{id: x.ID, token: token, placed: x.DeployTime, index: x.DeployIndex, outputs: len(ts.Outputs) > 0, inputs: ts.Inputs})
		ids = append(ids, x.ID)
	}
	verb := "deploy"
	if d.Redeploy {
		verb = "redeploy"
	}
	c.out.printf("%s %s %s", verb, e.id, strings.Join(ids, " "))
	// What the consumers read, once per vertex: the attempts the state
	// names, on their executors.
	shown := map[string]bool{}
	for _, ts := range d.Tasks {
		x := &ts.Execution
		key := x.Job + "/" + x.Vertex
		for _, in := range ts.Inputs {
			if in.Mode != wire.ModeBlocking || shown[key+"<"+in.Vertex] {
				continue
			}
			shown[key+"<"+in.Vertex] = true
			srcs := make([]string, len(in.Sources))
			for i, s := range in.Sources {
				srcs[i] = s.Execution + " on " + s.Executor
			}
			dist := ""
			if in.Forward {
				dist = " (forward)"
			}
			c.out.printf("  %s reads %s%s: %s", key, in.Vertex, dist, strings.Join(srcs, ", "))
		}
	}
}

// post puts a deploy request in flight; a request of the same leader for an
// execution already in flight replaces the older one (requests of another
// leader stay in flight beside it).
func (e *simExecutor) post(m deployMsg) {
	for i := range e.inbox {
		if e.inbox[i].id == m.id && e.inbox[i].token == m.token {
			e.inbox[i] = m
			return
		}
	}
	e.inbox = append(e.inbox, m)
}

// deliver hands the executor the deploy requests in flight to it. It starts
// what it does not hold and answers with the state of each; the leader
// handles the answer as a partial report, which acknowledges the
// deployments and cancels what it no longer expects.
//
// The network model: a request is delivered at most once, in any order
// relative to heartbeats, and never later than the ack deadline after the
// execution's placement (the reconciler's expiry rule depends on that
// bound); a later one is dropped.
func (c *cluster) deliver(e *simExecutor, named bool) {
	if len(e.inbox) == 0 {
		if named {
			c.out.printf("nothing in flight to %s", e.id)
		}
		return
	}
	switch e.status {
	case down:
		c.out.printf("deploy %s %s: lost, %s is down", e.id, msgIDs(e.inbox), e.id)
		e.inbox = nil
		return
	case frozen:
		c.out.printf("deploy %s %s: waits, %s is frozen", e.id, msgIDs(e.inbox), e.id)
		return
	}
	msgs := e.inbox
	e.inbox = nil
	// One request per run of messages from the same leader.
	for len(msgs) > 0 {
		n := 1
		for n < len(msgs) && msgs[n].token == msgs[0].token {
			n++
		}
		c.deliverRequest(e, msgs[:n])
		msgs = msgs[n:]
	}
}

func msgIDs(msgs []deployMsg) string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.id
	}
	return strings.Join(ids, " ")
}

func (c *cluster) deliverRequest(e *simExecutor, msgs []deployMsg) {
	token := msgs[0].token
	var fresh []deployMsg
	for _, m := range msgs {
		if c.nowMs()-m.placed > c.cfg.AckDeadline.Milliseconds() {
			c.out.printf("deploy %s %s: dropped, in flight past the ack deadline", e.id, m.id)
			continue
		}
		fresh = append(fresh, m)
	}
	if len(fresh) == 0 {
		return
	}
	if !e.accepts(token) {
		c.out.printf("%s refuses deploy %s: token %d is older than %d", e.id, msgIDs(fresh), token, e.token)
		return
	}
	if e.renewOnAny {
		e.lastHeartbeat = c.now
	}
	var started, already []string
	answer := make([]wire.ExecutionStatus, 0, len(fresh))
	for _, m := range fresh {
		if t, ok := e.held[m.id]; ok {
			already = append(already, m.id+" "+string(t.state))
		} else {
			t := &task{id: m.id, placed: m.index, state: wire.StateRunning, outputs: m.outputs}
			if missing := c.fetchInputs(e, m); len(missing) > 0 {
				t.state, t.unavailable = wire.StateFailed, missing
				t.message = "input unavailable: " + strings.Join(missing, " ")
				c.out.printf("%s cannot fetch %s for %s", e.id, strings.Join(missing, " "), m.id)
			}
			e.held[m.id] = t
			started = append(started, m.id)
		}
		answer = append(answer, e.statusOf(m.id))
	}
	if len(started) > 0 {
		c.out.printf("%s starts %s", e.id, strings.Join(started, " "))
	}
	if len(already) > 0 {
		c.out.printf("%s already holds %s", e.id, strings.Join(already, ", "))
	}
	// The tasks run before the leader hears of them.
	c.inv.checkExecutors(c)
	if e.muted {
		c.out.printf("%s's answer is lost", e.id)
		return
	}
	core, err := c.coreOf(token)
	if err != nil {
		return
	}
	core.QueueAcks(e.id, c.carry(core, core.Partial(c.read, e.id, answer, nil, c.now)))
}

// sendHeartbeat sends a heartbeat of the leader with this token to e, with
// the acks queued for e; if e answers, the answer (its report, taken now)
// is in flight back to the leader. It reports whether e answered.
func (c *cluster) sendHeartbeat(e *simExecutor, token uint64) (bool, error) {
	core, err := c.coreOf(token)
	if err != nil {
		return false, err
	}
	h, ok := core.Heartbeat(c.read, e.id, c.now)
	if !ok {
		c.out.printf("the leader with token %d does not know %s", token, e.id)
		return false, nil
	}
	if h.ProbeStarted {
		c.out.printf("%s: silent for %s: heartbeats are probes (no lease renewal) until it answers", e.id, seconds(h.Silent))
	}
	switch e.status {
	case down, frozen:
		c.out.chatf("%s does not answer (%s)", e.id, e.status)
		core.HeartbeatFailed(h)
		return false, nil
	}
	if !e.accepts(token) {
		c.out.printf("%s refuses the heartbeat: token %d is older than %d", e.id, token, e.token)
		core.HeartbeatFailed(h)
		return false, nil
	}
	c.forget(e, h.Ack)
	if !h.Probe {
		e.lastHeartbeat = c.now
	}
	rep := e.report()
	if e.muted {
		c.out.chatf("%s holds %s, its answer is lost", e.id, reportString(rep.Executions))
		core.HeartbeatFailed(h)
		return false, nil
	}
	e.answers = append(e.answers, heartbeatAnswer{hb: h, token: token, report: rep})
	return true, nil
}

// receiveHeartbeat hands the leader an answer in flight from e and
// carries out what it asks for.
func (c *cluster) receiveHeartbeat(e *simExecutor, a heartbeatAnswer, inFlight bool) {
	if inFlight {
		c.out.printf("%s's answer to the heartbeat at index %d: holds %s", e.id, a.hb.Base, reportString(a.report.Executions))
	} else {
		c.out.chatf("%s holds %s", e.id, reportString(a.report.Executions))
	}
	core, err := c.coreOf(a.token)
	if err != nil {
		return
	}
	core.QueueAcks(e.id, c.carry(core, core.HeartbeatAnswered(c.read, a.hb, &a.report, c.now)))
	// The answer was asked for after the loss was committed and the cancels
	// it led to reached the executor: its leftovers are dealt with.
	if e.lostAt != 0 && a.hb.Base >= e.lostAt && e.status == up && a.token >= e.token {
		e.lostAt = 0
	}
	if a.token == c.token && e.token == a.token && e.status == up {
		c.inv.checkAfterHeartbeat(c, e, a.report.Executions)
	}
	c.inv.checkExecutors(c)
}

// heartbeat is sendHeartbeat followed at once by the answer.
func (c *cluster) heartbeat(e *simExecutor, token uint64) error {
	ok, err := c.sendHeartbeat(e, token)
	if err != nil || !ok {
		return err
	}
	a := e.answers[len(e.answers)-1]
	e.answers = e.answers[:len(e.answers)-1]
	c.receiveHeartbeat(e, a, false)
	return nil
}

// fetchInputs is a consumer's executor fetching the blocking inputs of the
// task m deploys, before the task starts: it returns the sources it could
// not fetch (their executor down or frozen, or not holding the partition).
// Pipelined inputs stream from producers that run beside it; the simulation
// does not follow their bytes.
func (c *cluster) fetchInputs(e *simExecutor, m deployMsg) []string {
	sub := mustExecutionName(m.id).subtask
	var missing []string
	for _, in := range m.inputs {
		if in.Mode != wire.ModeBlocking {
			continue
		}
		for _, src := range in.Sources {
			if in.Forward && src.Subtask != sub {
				continue
			}
			c.inv.checkSource(c, m.id, src)
			holder := c.execs[src.Executor]
			if holder == nil || holder.status != up || !holder.parts[src.Execution] {
				missing = append(missing, src.Execution)
			}
		}
	}
	return missing
}

// releaseOn asks e to delete partitions nobody needs.
func (c *cluster) releaseOn(e *simExecutor, ids []string, token uint64) {
	what := "release " + e.id + " " + strings.Join(ids, " ")
	if !c.reachable(e, what, token) {
		return
	}
	c.inv.checkRelease(c, e, ids)
	c.out.printf("%s", what)
	for _, id := range ids {
		delete(e.parts, id)
	}
}

func (c *cluster) reachable(e *simExecutor, what string, token uint64) bool {
	if e.status != up {
		c.out.printf("%s: lost, %s is %s", what, e.id, e.status)
		return false
	}
	if !e.accepts(token) {
		c.out.printf("%s refuses %s: token %d is older than %d", e.id, what, token, e.token)
		return false
	}
	return true
}

func (c *cluster) cancelOn(e *simExecutor, id string, token uint64) {
	what := "cancel " + e.id + " " + id
	if c.reachable(e, what, token) {
		c.out.printf("%s", what)
		if e.renewOnAny {
			e.lastHeartbeat = c.now
		}
		e.cancel(id)
	}
}

// forget is e receiving acks with a heartbeat it accepted: it forgets the
// terminal executions acknowledged.
func (c *cluster) forget(e *simExecutor, ids []string) {
	var forget []string
	seen := map[string]bool{}
	for _, id := range ids {
		if t := e.held[id]; t != nil && t.state.Terminal() && !seen[id] {
			seen[id] = true
			forget = append(forget, id)
		}
	}
	if len(forget) == 0 {
		return
	}
	sort.Strings(forget)
	c.out.printf("ack %s %s", e.id, strings.Join(forget, " "))
	for _, id := range forget {
		delete(e.held, id)
	}
}

// tick advances the clock by d in steps of the heartbeat interval. After
// each step: executors whose lease ran out stop their tasks, and the
// current leader refreshes its executor table, judges liveness
// (executor-lost for a newly lost executor with live executions), restarts
// the regions whose restart is due and, with heartbeats, heartbeats every
// executor. With leaderPaused the leader does nothing until the last step:
// its process was paused, and it finds the time gone when it resumes.
func (c *cluster) tick(d time.Duration, heartbeats, leaderPaused bool) {
	step := c.cfg.Heartbeat
	for done := time.Duration(0); done < d; {
		s := min(step, d-done)
		done += s
		c.now = c.now.Add(s)
		mark := len(c.out.lines)
		c.out.indent++
		c.expireLeases()
		if !leaderPaused || done == d {
			c.leaderTick(heartbeats)
		}
		c.out.indent--
		if len(c.out.lines) > mark || done == d {
			c.out.insert(mark, c.elapsed())
		}
	}
}

// leaderTick is what the current leader's loops do at a tick.
func (c *cluster) leaderTick(heartbeats bool) {
	if c.core == nil {
		return
	}
	c.refresh()
	r := c.core.Tick(c.read, c.now)
	for _, e := range r.Events {
		c.out.printf("%s", e.Msg)
	}
	c.carry(c.core, r)
	c.carry(c.core, c.core.Drains(c.read, c.now))
	restart, _ := c.core.Restarts(c.read, c.now)
	c.carry(c.core, restart)
	if heartbeats {
		c.out.quiet++
		for _, id := range c.executorIDs() {
			_ = c.heartbeat(c.execs[id], c.token)
		}
		c.out.quiet--
	}
}

func (c *cluster) expireLeases() {
	for _, id := range c.executorIDs() {
		e := c.execs[id]
		if e.status == up {
			c.checkLease(e)
		}
	}
}

// checkLease stops e's tasks if its lease has run out.
func (c *cluster) checkLease(e *simExecutor) {
	if e.lease == 0 || c.now.Sub(e.lastHeartbeat) < e.lease || len(e.liveIDs()) == 0 {
		return
	}
	since := "never renewed"
	if !e.lastHeartbeat.IsZero() {
		since = "no heartbeat for " + seconds(c.now.Sub(e.lastHeartbeat))
	}
	c.out.printf("%s: lease expired (%s), stops %s", e.id, since, strings.Join(e.fence(), " "))
}

// output collects a command's output lines. Chatty lines (what an executor
// holds, who does not answer) are left out of the heartbeats a tick runs.
type output struct {
	lines  []string
	indent int
	quiet  int
}

func (o *output) printf(format string, args ...any) {
	o.lines = append(o.lines, strings.Repeat("  ", o.indent)+fmt.Sprintf(format, args...))
}

func (o *output) chatf(format string, args ...any) {
	if o.quiet == 0 {
		o.printf(format, args...)
	}
}

func (o *output) insert(at int, line string) {
	o.lines = slices.Insert(o.lines, at, strings.Repeat("  ", o.indent)+line)
}

func (o *output) take() []string {
	l := o.lines
	o.lines = nil
	return l
}
