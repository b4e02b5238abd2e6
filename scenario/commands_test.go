package scenario

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"jobmaster/fsm"
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// handlers maps each command of the scenario language to its handler. A
// handler prints to c.out; an error means the scenario itself is wrong (an
// unknown executor, a missing argument) and fails the test.
var handlers map[string]func(*cluster, command) error

func init() {
	handlers = map[string]func(*cluster, command) error{
		"config":            cmdConfig,
		"add-executor":      cmdAddExecutor,
		"establish":         cmdEstablish,
		"spec":              cmdSpec,
		"submit":            cmdSubmit,
		"cancel":            cmdCancel,
		"forget":            cmdForget,
		"schedule":          cmdSchedule,
		"deliver":           cmdDeliver,
		"drop":              cmdDrop,
		"heartbeat":         cmdHeartbeat,
		"send-heartbeat":    cmdSendHeartbeat,
		"receive-heartbeat": cmdReceiveHeartbeat,
		"exit":              cmdExit,
		"hang":              cmdHang,
		"kill-executor":     cmdKill,
		"restart-executor":  cmdRestartExecutor,
		"freeze-executor":   cmdFreeze,
		"drop-partition":    cmdDropPartition,
		"thaw-executor":     cmdThaw,
		"mute-executor":     cmdMute,
		"unmute-executor":   cmdUnmute,
		"tick":              cmdTick,
		"jobs":              func(c *cluster, _ command) error { c.printJobs(); return nil },
		"job":               cmdJob,
		"executor":          cmdExecutor,
	}
}

// run executes one command and returns its output lines, "ok" when it
// printed nothing. After every command the invariants are checked; a
// violation is printed as a line starting with "!!".
func (c *cluster) run(cmd command) ([]string, error) {
	h, ok := handlers[cmd.name]
	if !ok {
		return nil, fmt.Errorf("unknown command %q", cmd.name)
	}
	if err := h(c, cmd); err != nil {
		c.out.take()
		return nil, err
	}
	c.inv.checkExecutors(c)
	out := c.out.take()
	if len(out) == 0 {
		out = []string{"ok"}
	}
	return out, nil
}

// runText parses and runs one command line (for the property test).
func (c *cluster) runText(line, input string) ([]string, error) {
	cmd := parseCommand(line)
	cmd.input = input
	return c.run(cmd)
}

func (cmd command) arg(i int) (string, error) {
	if i >= len(cmd.args) {
		return "", fmt.Errorf("%s: missing argument %d", cmd.name, i+1)
	}
	return cmd.args[i], nil
}

func (cmd command) duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := cmd.kv[key]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %v", cmd.name, key, err)
	}
	return d, nil
}

func (cmd command) integer(key string, def int) (int, error) {
	v, ok := cmd.kv[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %v", cmd.name, key, err)
	}
	return n, nil
}

// token is the fencing token a leader command carries: the current leader's,
// or token=N to play a leader of an older term whose goroutine is still at
// work.
func (c *cluster) tokenOf(cmd command) (uint64, error) {
	v, ok := cmd.kv["token"]
	if !ok {
		if c.token == 0 {
			return 0, fmt.Errorf("%s: no leader yet (use establish)", cmd.name)
		}
		return c.token, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: token: %v", cmd.name, err)
	}
	return n, nil
}

func (c *cluster) executor(id string) (*simExecutor, error) {
	e, ok := c.execs[id]
	if !ok {
		return nil, fmt.Errorf("no executor %q", id)
	}
	return e, nil
}

// targets resolves the first argument: one executor, or all of them for
// "all" (or no argument when allowed).
func (c *cluster) targets(cmd command, allowNone bool) ([]*simExecutor, bool, error) {
	if len(cmd.args) == 0 && allowNone || len(cmd.args) > 0 && cmd.args[0] == "all" {
		var out []*simExecutor
		for _, id := range c.executorIDs() {
			out = append(out, c.execs[id])
		}
		return out, false, nil
	}
	id, err := cmd.arg(0)
	if err != nil {
		return nil, false, err
	}
	e, err := c.executor(id)
	if err != nil {
		return nil, false, err
	}
	return []*simExecutor{e}, true, nil
}

// config interval=1s timeout=10s ack-deadline=5s: the timing of leaders
// established from now on.
func cmdConfig(c *cluster, cmd command) error {
	var err error
	if c.cfg.Heartbeat, err = cmd.duration("interval", c.cfg.Heartbeat); err != nil {
		return err
	}
	if c.cfg.Timeout, err = cmd.duration("timeout", c.cfg.Timeout); err != nil {
		return err
	}
	if c.cfg.AckDeadline, err = cmd.duration("ack-deadline", c.cfg.AckDeadline); err != nil {
		return err
	}
	c.out.printf("heartbeat interval %s, executor timeout %s, ack deadline %s",
		seconds(c.cfg.Heartbeat), seconds(c.cfg.Timeout), seconds(c.cfg.AckDeadline))
	return nil
}

// add-executor e1 slots=2 [lease=6s [renew-on=heartbeat|any]]
func cmdAddExecutor(c *cluster, cmd command) error {
	id, err := cmd.arg(0)
	if err != nil {
		return err
	}
	if _, dup := c.execs[id]; dup {
		return fmt.Errorf("executor %q exists", id)
	}
	slots, err := cmd.integer("slots", 1)
	if err != nil {
		return err
	}
	lease, err := cmd.duration("lease", 0)
	if err != nil {
		return err
	}
	e := newSimExecutor(id, slots, lease, c.now)
	switch cmd.kv["renew-on"] {
	case "", "heartbeat":
	case "any":
		e.renewOnAny = true
	default:
		return fmt.Errorf("add-executor: renew-on must be heartbeat or any")
	}
	c.execs[id] = e
	// The masters' --executor-lease is the executors' --lease: a leader
	// assumes it until an executor reports its own.
	c.cfg.Lease = max(c.cfg.Lease, lease)
	c.refresh() // gossip tells the leader
	line := fmt.Sprintf("%s joins with %d slots", id, slots)
	if lease != 0 {
		line += ", lease " + seconds(lease)
	}
	if e.renewOnAny {
		line += " renewed by any request"
	}
	c.out.printf("%s", line)
	return nil
}

// establish m1
func cmdEstablish(c *cluster, cmd command) error {
	node, err := cmd.arg(0)
	if err != nil {
		return err
	}
	c.establish(node)
	return nil
}

// spec name, with the JSON job spec as input: names a spec for submit.
func cmdSpec(c *cluster, cmd command) error {
	name, err := cmd.arg(0)
	if err != nil {
		return err
	}
	if strings.TrimSpace(cmd.input) == "" {
		return fmt.Errorf("spec %s: no job spec", name)
	}
	c.specs[name] = cmd.input
	return nil
}

// submit a [spec=name], with the JSON job spec as input unless named.
func cmdSubmit(c *cluster, cmd command) error {
	id, err := cmd.arg(0)
	if err != nil {
		return err
	}
	token, err := c.tokenOf(cmd)
	if err != nil {
		return err
	}
	body := cmd.input
	if name, ok := cmd.kv["spec"]; ok {
		if body, ok = c.specs[name]; !ok {
			return fmt.Errorf("no spec %q", name)
		}
	}
	spec, err := jobspec.Parse([]byte(body))
	if err != nil {
		c.out.printf("submit %s refused: %v", id, err)
		return nil
	}
	c.apply(&fsm.SubmitJob{Fenced: c.fenced(token), ID: id, Spec: spec})
	return nil
}

// cancel a [token=N]
func cmdCancel(c *cluster, cmd command) error {
	id, err := cmd.arg(0)
	if err != nil {
		return err
	}
	token, err := c.tokenOf(cmd)
	if err != nil {
		return err
	}
	c.apply(&fsm.CancelJob{Fenced: c.fenced(token), ID: id})
	return nil
}

// forget a [b ...] [token=N]: garbage-collect ended jobs (forget-jobs).
func cmdForget(c *cluster, cmd command) error {
	if len(cmd.args) == 0 {
		return fmt.Errorf("forget: no job")
	}
	token, err := c.tokenOf(cmd)
	if err != nil {
		return err
	}
	c.apply(&fsm.ForgetJobs{Fenced: c.fenced(token), IDs: cmd.args})
	return nil
}

// schedule [token=N]
func cmdSchedule(c *cluster, cmd command) error {
	token, err := c.tokenOf(cmd)
	if err != nil {
		return err
	}
	return c.schedule(token)
}

// deliver [e1|all]: deliver the deploy requests in flight.
func cmdDeliver(c *cluster, cmd command) error {
	es, named, err := c.targets(cmd, true)
	if err != nil {
		return err
	}
	for _, e := range es {
		c.deliver(e, named)
	}
	return nil
}

// drop e1: the network loses the deploy requests in flight to e1.
func cmdDrop(c *cluster, cmd command) error {
	es, _, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	for _, e := range es {
		if len(e.inbox) > 0 {
			c.out.printf("deploy %s %s: lost in the network", e.id, msgIDs(e.inbox))
			e.inbox = nil
		}
	}
	return nil
}

// heartbeat e1|all [token=N]
func cmdHeartbeat(c *cluster, cmd command) error {
	es, _, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	token, err := c.tokenOf(cmd)
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := c.heartbeat(e, token); err != nil {
			return err
		}
	}
	return nil
}

// send-heartbeat e1|all [token=N]: the executor answers, the answer stays in
// flight.
func cmdSendHeartbeat(c *cluster, cmd command) error {
	es, _, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	token, err := c.tokenOf(cmd)
	if err != nil {
		return err
	}
	for _, e := range es {
		ok, err := c.sendHeartbeat(e, token)
		if err != nil {
			return err
		}
		if ok {
			a := e.answers[len(e.answers)-1]
			c.out.printf("heartbeat %s at index %d: %s holds %s (answer in flight)", e.id, a.hb.Base, e.id, reportString(a.report.Executions))
		}
	}
	return nil
}

// receive-heartbeat e1|all: the oldest answer in flight reaches the leader.
func cmdReceiveHeartbeat(c *cluster, cmd command) error {
	es, named, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	for _, e := range es {
		if len(e.answers) == 0 {
			if named {
				return fmt.Errorf("no heartbeat answer in flight from %s", e.id)
			}
			continue
		}
		a := e.answers[0]
		e.answers = e.answers[1:]
		c.receiveHeartbeat(e, a, true)
	}
	return nil
}

func (c *cluster) heldTask(cmd command) (*simExecutor, *task, error) {
	eid, err := cmd.arg(0)
	if err != nil {
		return nil, nil, err
	}
	e, err := c.executor(eid)
	if err != nil {
		return nil, nil, err
	}
	id, err := cmd.arg(1)
	if err != nil {
		return nil, nil, err
	}
	t := e.held[id]
	if t == nil || t.state.Terminal() || e.status != up {
		return nil, nil, fmt.Errorf("%s does not run %s", eid, id)
	}
	return e, t, nil
}

// exit e1 <execution id> code=0|N: the task ends. Exit 0 is FINISHED,
// another code FAILED, and a task being cancelled ends CANCELED.
func cmdExit(c *cluster, cmd command) error {
	e, t, err := c.heldTask(cmd)
	if err != nil {
		return err
	}
	code, err := cmd.integer("code", 0)
	if err != nil {
		return err
	}
	switch {
	case t.state == wire.StateCanceling:
		t.state, t.message = wire.StateCanceled, ""
	case code == 0:
		t.state = wire.StateFinished
		if t.outputs {
			e.parts[t.id] = true
		}
	default:
		t.state, t.message = wire.StateFailed, fmt.Sprintf("exit status %d", code)
	}
	c.out.printf("%s: %s %s", e.id, t.id, t.state)
	return nil
}

// drop-partition e1 <execution id>: the partition's files are deleted
// behind the executor's back (a disk replaced, a cleanup gone wrong).
func cmdDropPartition(c *cluster, cmd command) error {
	eid, err := cmd.arg(0)
	if err != nil {
		return err
	}
	e, err := c.executor(eid)
	if err != nil {
		return err
	}
	id, err := cmd.arg(1)
	if err != nil {
		return err
	}
	if !e.parts[id] {
		return fmt.Errorf("%s holds no partition %s", eid, id)
	}
	delete(e.parts, id)
	c.out.printf("%s no longer holds partition %s", eid, id)
	return nil
}

// hang e1 <execution id>: the task ignores a cancel (stays CANCELING) until
// it exits.
func cmdHang(c *cluster, cmd command) error {
	_, t, err := c.heldTask(cmd)
	if err != nil {
		return err
	}
	t.hang = true
	return nil
}

// kill-executor e1: the process dies with its tasks.
func cmdKill(c *cluster, cmd command) error {
	es, _, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	for _, e := range es {
		line := e.id + " is down"
		if ids := e.heldIDs(); len(ids) > 0 {
			line += ", its tasks gone: " + strings.Join(ids, " ")
		}
		e.status, e.held, e.inbox = down, map[string]*task{}, nil
		c.out.printf("%s", line)
	}
	return nil
}

// restart-executor e1: a new process, holding nothing.
func cmdRestartExecutor(c *cluster, cmd command) error {
	es, _, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	for _, e := range es {
		e.status, e.held = up, map[string]*task{}
		e.lastHeartbeat = time.Time{} // no lease until a heartbeat renews it
		if e.renewOnAny {
			e.lastHeartbeat = c.now
		}
		c.out.printf("%s is up, holding nothing", e.id)
	}
	return nil
}

// freeze-executor e1: the machine pauses.
func cmdFreeze(c *cluster, cmd command) error {
	es, _, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	for _, e := range es {
		if e.status == up {
			e.status = frozen
			c.out.printf("%s is frozen", e.id)
		}
	}
	return nil
}

// thaw-executor e1: the machine resumes; an executor with a lease that ran
// out while it was frozen stops its tasks at once.
func cmdThaw(c *cluster, cmd command) error {
	es, _, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	for _, e := range es {
		if e.status == frozen {
			e.status = up
			c.out.printf("%s is thawed", e.id)
			c.checkLease(e)
		}
	}
	return nil
}

// mute-executor e1: e1 gets every request and acts on it, but its answers
// never reach the leader.
func cmdMute(c *cluster, cmd command) error {
	es, _, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	for _, e := range es {
		e.muted = true
		c.out.printf("%s's answers are lost from now on", e.id)
	}
	return nil
}

// unmute-executor e1
func cmdUnmute(c *cluster, cmd command) error {
	es, _, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	for _, e := range es {
		e.muted = false
		c.out.printf("%s's answers get through again", e.id)
	}
	return nil
}

// tick 5s [heartbeats] [leader-paused]
func cmdTick(c *cluster, cmd command) error {
	s, err := cmd.arg(0)
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("tick: bad duration %q", s)
	}
	heartbeats, paused := false, false
	for _, a := range cmd.args[1:] {
		switch a {
		case "heartbeats":
			heartbeats = true
		case "leader-paused":
			paused = true
		default:
			return fmt.Errorf("tick: unknown argument %q", a)
		}
	}
	c.tick(d, heartbeats, paused)
	return nil
}

// job a
func cmdJob(c *cluster, cmd command) error {
	id, err := cmd.arg(0)
	if err != nil {
		return err
	}
	c.printJob(id)
	return nil
}

// executor e1|all
func cmdExecutor(c *cluster, cmd command) error {
	es, _, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	for _, e := range es {
		c.printExecutor(e)
	}
	return nil
}

// sortedStrings returns the keys of a set in order.
func sortedStrings(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
