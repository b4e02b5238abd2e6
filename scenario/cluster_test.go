package scenario

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"jobmaster/fsm"
	"jobmaster/placement"
	"jobmaster/reconcile"
	"jobmaster/wire"
)

// config holds the leader's timing settings.
type config struct {
	interval    time.Duration // heartbeat interval
	timeout     time.Duration // executor timeout: lost after this long without an answer
	ackDeadline time.Duration // how long a deployment may stay unacknowledged
}

var defaultConfig = config{interval: time.Second, timeout: 10 * time.Second, ackDeadline: 5 * time.Second}

// startTime is where every scenario's virtual clock starts.
var startTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// cluster simulates, deterministically and in memory, the replicated state,
// the leader's duties and the executors. The leader's decisions are the
// production ones: placement.Plan, reconcile.Reconcile, reconcile.Commands,
// reconcile.Liveness and the FSM's views; every command goes through the
// FSM's codec in a log entry of its own index.
//
// What the cluster keeps outside the FSM is what a leader keeps in memory
// (the liveness of executors) and what the executors and the network hold;
// a new leader (establish) starts its memory afresh.
type cluster struct {
	cfg   config
	state *fsm.State
	now   time.Time
	// leader and token are the current leader and its fencing token.
	leader string
	token  uint64
	execs  map[string]*simExecutor
	// seen is the leader's liveness view of every executor it knows.
	seen  map[string]*executorView
	specs map[string]string
	out   *output
	inv   *invariants
}

// executorView is the leader's memory of an executor.
type executorView struct {
	lastAnswer time.Time
	status     string // reconcile.Alive, Suspect or Lost
	probing    bool   // heartbeats are probes: they do not renew the lease
}

func newCluster() *cluster {
	return &cluster{
		cfg:   defaultConfig,
		state: fsm.NewState(),
		now:   startTime,
		execs: map[string]*simExecutor{},
		seen:  map[string]*executorView{},
		specs: map[string]string{},
		out:   &output{},
		inv:   newInvariants(),
	}
}

func (c *cluster) nowMs() int64 { return c.now.UnixMilli() }

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
// outcome, then every job status that changed.
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

// establish commits establish-leadership for node: the entry's index is the
// new fencing token. The new leader knows nothing but the FSM: it hears of
// every executor (gossip) and counts them alive from now.
func (c *cluster) establish(node string) {
	r := c.apply(&fsm.EstablishLeadership{Node: node})
	c.leader, c.token = node, r[0].Epoch
	for _, id := range c.executorIDs() {
		c.seen[id] = &executorView{lastAnswer: c.now, status: reconcile.Alive}
	}
}

// schedule runs placement over the ready regions and the executors the
// leader believes alive, commits the placements in one entry and sends the
// deployments.
func (c *cluster) schedule(token uint64) {
	regions := c.state.ReadyRegions()
	if len(regions) == 0 {
		c.out.printf("nothing to place")
		return
	}
	used := c.state.UsedSlots()
	var offer []placement.Executor
	for _, id := range c.executorIDs() {
		if c.seen[id].status == reconcile.Alive {
			offer = append(offer, placement.Executor{ID: id, Slots: c.execs[id].slots, Used: used[id]})
		}
	}
	plans := placement.Plan(regions, offer)
	placed := map[string]bool{}
	if len(plans) > 0 {
		cmds := make([]fsm.Command, len(plans))
		for i, p := range plans {
			cmds[i] = p.Command(token, c.nowMs())
			placed[fmt.Sprintf("%s/%d", p.Job, p.Region)] = true
		}
		for _, r := range c.apply(cmds...) {
			if r.Err == nil {
				c.sendDeploys(r.Placed, token)
			}
		}
	}
	for _, r := range regions {
		if !placed[fmt.Sprintf("%s/%d", r.Job, r.Region)] {
			c.out.printf("%s region=%d waits: not enough free slots", r.Job, r.Region)
		}
	}
}

// sendDeploys puts deploy requests for placed executions in flight, one
// request per executor.
func (c *cluster) sendDeploys(placed []fsm.Execution, token uint64) {
	var order []string
	byExec := map[string][]fsm.Execution{}
	for _, e := range placed {
		if _, ok := byExec[e.Executor]; !ok {
			order = append(order, e.Executor)
		}
		byExec[e.Executor] = append(byExec[e.Executor], e)
	}
	for _, ex := range order {
		ids := make([]string, 0, len(byExec[ex]))
		for _, e := range byExec[ex] {
			c.execs[ex].post(deployMsg{id: e.ID, token: token, placed: e.DeployTime, index: e.DeployIndex})
			ids = append(ids, e.ID)
		}
		c.out.printf("deploy %s %s", ex, strings.Join(ids, " "))
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
// handles the answer as a partial report (reconcile with Partial), which
// acknowledges the deployments and cancels what it no longer expects.
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
		if c.nowMs()-m.placed > c.cfg.ackDeadline.Milliseconds() {
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
			e.held[m.id] = &task{id: m.id, placed: m.index, state: wire.StateRunning}
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
	c.handleReport(e, answer, true, c.state.Index(), c.nowMs(), token)
}

// sendHeartbeat sends a heartbeat to e; if e answers, the answer (its
// report, taken now) is in flight back to the leader. It reports whether e
// answered.
func (c *cluster) sendHeartbeat(e *simExecutor, token uint64) bool {
	base := c.state.Index()
	probe := c.probe(e, token)
	switch e.status {
	case down, frozen:
		c.out.chatf("%s does not answer (%s)", e.id, e.status)
		return false
	}
	if !e.accepts(token) {
		c.out.printf("%s refuses the heartbeat: token %d is older than %d", e.id, token, e.token)
		return false
	}
	if !probe {
		e.lastHeartbeat = c.now
	}
	if e.muted {
		c.out.chatf("%s holds %s, its answer is lost", e.id, reportString(e.report()))
		return false
	}
	e.answers = append(e.answers, heartbeatAnswer{base: base, sent: c.nowMs(), token: token, report: e.report()})
	return true
}

// probe tells whether a heartbeat of the leader with this token to e is a
// probe, which does not renew e's lease: e has not answered for longer than
// the executor timeout minus its lease, so a renewed lease could outlast the
// moment e is declared lost (its answers may be lost while requests arrive).
// This is master.mustProbe's rule; the RPC timeout it also subtracts is 0
// here, as simulated requests arrive when they are sent.
func (c *cluster) probe(e *simExecutor, token uint64) bool {
	v := c.seen[e.id]
	if token != c.token || v == nil || e.lease == 0 {
		return false
	}
	probe := c.now.Sub(v.lastAnswer) > c.cfg.timeout-e.lease
	if probe && !v.probing {
		c.out.printf("%s: silent for %s: heartbeats are probes (no lease renewal) until it answers", e.id, seconds(c.now.Sub(v.lastAnswer)))
	}
	v.probing = probe
	return probe
}

// receiveHeartbeat hands the leader an answer in flight from e and
// reconciles it.
func (c *cluster) receiveHeartbeat(e *simExecutor, a heartbeatAnswer, inFlight bool) {
	if v := c.seen[e.id]; a.token == c.token && v != nil {
		v.lastAnswer = c.now
		if v.status != reconcile.Alive {
			c.out.printf("%s: %s -> %s", e.id, v.status, reconcile.Alive)
			v.status = reconcile.Alive
		}
		v.probing = false
	}
	if inFlight {
		c.out.printf("%s's answer to the heartbeat at index %d: holds %s", e.id, a.base, reportString(a.report))
	} else {
		c.out.chatf("%s holds %s", e.id, reportString(a.report))
	}
	c.handleReport(e, a.report, false, a.base, a.sent, a.token)
	// The answer was asked for after the loss was committed and the cancels
	// it led to reached the executor: its leftovers are dealt with.
	if e.lostAt != 0 && a.base >= e.lostAt && e.status == up && a.token >= e.token {
		e.lostAt = 0
	}
	if a.token == c.token && e.token == a.token && e.status == up {
		c.inv.checkAfterHeartbeat(c, e, a.report)
	}
	c.inv.checkExecutors(c)
}

// heartbeat is sendHeartbeat followed at once by the answer.
func (c *cluster) heartbeat(e *simExecutor, token uint64) {
	if c.sendHeartbeat(e, token) {
		a := e.answers[len(e.answers)-1]
		e.answers = e.answers[:len(e.answers)-1]
		c.receiveHeartbeat(e, a, false)
	}
}

// handleReport reconciles a report from e, asked for at index base and time
// sent, commits the resulting commands in one entry and carries out the
// actions on e: cancels, redeployments and acknowledgments.
func (c *cluster) handleReport(e *simExecutor, reported []wire.ExecutionStatus, partial bool, base uint64, sent int64, token uint64) {
	res := reconcile.Reconcile(reconcile.Input{
		Executor:    e.id,
		Expected:    c.state.Expected(e.id),
		Reported:    reported,
		Partial:     partial,
		BaseIndex:   base,
		Now:         sent, // the report shows the executor as it was then
		AckDeadline: c.cfg.ackDeadline,
	})
	c.inv.checkRecord(c, e, res.Record)
	ack := slices.Clone(res.Ack)
	if cmds := reconcile.Commands(e.id, res, token, c.nowMs(), c.cfg.ackDeadline); len(cmds) > 0 {
		for i, r := range c.apply(cmds...) {
			if _, ok := cmds[i].(*fsm.ReportExecutions); ok {
				ack = append(ack, r.Terminal...)
			}
		}
	}
	for _, id := range res.Cancel {
		c.cancelOn(e, id, token)
	}
	if len(res.Redeploy) > 0 {
		for _, id := range res.Redeploy {
			x, _ := c.state.Execution(id)
			e.post(deployMsg{id: id, token: token, placed: x.DeployTime, index: x.DeployIndex})
		}
		c.out.printf("redeploy %s %s", e.id, strings.Join(res.Redeploy, " "))
	}
	c.ackOn(e, ack, token)
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

// ackOn tells e which terminal executions it may forget.
func (c *cluster) ackOn(e *simExecutor, ids []string, token uint64) {
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
	what := "ack " + e.id + " " + strings.Join(forget, " ")
	if c.reachable(e, what, token) {
		c.out.printf("%s", what)
		for _, id := range forget {
			delete(e.held, id)
		}
	}
}

// tick advances the clock by d in one step, or with heartbeats in steps of
// the heartbeat interval with every executor heartbeated after each step.
// After each step: executors whose lease ran out stop their tasks, the
// leader judges liveness (executor-lost for a newly lost executor with live
// executions) and restarts the regions whose restart is due.
func (c *cluster) tick(d time.Duration, heartbeats bool) {
	step := d
	if heartbeats {
		step = c.cfg.interval
	}
	for done := time.Duration(0); done < d; {
		s := min(step, d-done)
		done += s
		c.now = c.now.Add(s)
		mark := len(c.out.lines)
		c.out.indent++
		c.expireLeases()
		c.judgeLiveness()
		c.restartDue()
		if heartbeats {
			c.out.quiet++
			for _, id := range c.executorIDs() {
				c.heartbeat(c.execs[id], c.token)
			}
			c.out.quiet--
		}
		c.out.indent--
		if len(c.out.lines) > mark || done == d {
			c.out.insert(mark, c.elapsed())
		}
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

func (c *cluster) judgeLiveness() {
	withWork := c.state.ExecutorsWithWork()
	for _, id := range c.executorIDs() {
		v := c.seen[id]
		st := reconcile.Liveness(c.now, v.lastAnswer, c.cfg.interval, c.cfg.timeout)
		if st == v.status {
			continue
		}
		c.out.printf("%s: %s -> %s", id, v.status, st)
		v.status = st
		if st == reconcile.Lost && slices.Contains(withWork, id) {
			c.apply(&fsm.ExecutorLost{Fenced: c.fenced(c.token), Executor: id})
		}
	}
}

func (c *cluster) restartDue() {
	jobs := c.state.RestartsDue(c.nowMs())
	if len(jobs) == 0 {
		return
	}
	cmds := make([]fsm.Command, len(jobs))
	for i, j := range jobs {
		cmds[i] = &fsm.RestartRegions{Fenced: c.fenced(c.token), Job: j}
	}
	c.apply(cmds...)
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
