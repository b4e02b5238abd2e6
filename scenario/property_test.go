package scenario

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"jobmaster/fsm"
	"jobmaster/wire"
)

// TestPropertyScenarios drives random sequences of scenario commands, faults
// included (executors killed, restarted, frozen, muted, deploys lost, leader
// failovers, stale-token commands), and checks after every command the
// invariants of type invariants:
//
//   - at most one attempt of a subtask alive, not counting attempts on an
//     executor declared lost and not heard from since, or being cancelled
//     (the exact statement, and why it is the true one given the lease and
//     the timeout, is on type invariants);
//   - unknown executions are cancelled by the heartbeat that shows them;
//   - a terminal job status or execution state, once recorded, never
//     changes; attempts grow one by one, each after the previous one ended;
//     the expected sets and slot use agree with the executions.
//
// Then the faults stop (every executor up and answering) and the cluster is
// driven to quiescence: every job must reach a terminal state, and nothing
// may be left running or unacknowledged anywhere.
func TestPropertyScenarios(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := newPropRun(rt)
		steps := rapid.IntRange(1, 400).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			action := drawAction(rt)
			action.run(p)
			p.check()
		}
		p.quiesce()
	})
}

// drawAction draws an action by weight. Rapid draws small integers more
// often than others; going through a wide range keeps the weights close to
// what propActions says.
func drawAction(t *rapid.T) propAction {
	return propActions[rapid.IntRange(0, 1<<20).Draw(t, "action")%len(propActions)]
}

// TestPropertyFailoverRestartsNothing: when the only trouble is leader
// failovers (with stale-token commands of old leaders and any interleaving
// of heartbeats, answers and deliveries, time passing in heartbeat
// intervals with the deploys delivered), no execution fails but by its own
// task exiting non-zero: a failover never fails, hence never restarts, a
// healthy execution (docs/architecture.md, safety property 7). The invariants of
// TestPropertyScenarios are checked too, and the run ends quiescent.
func TestPropertyFailoverRestartsNothing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := newPropRun(rt)
		steps := rapid.IntRange(1, 400).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			failoverActions[rapid.IntRange(0, 1<<20).Draw(rt, "action")%len(failoverActions)].run(p)
			p.check()
			p.onlyTasksFail()
		}
		p.quiesce()
		p.onlyTasksFail()
	})
}

var failoverActions = weighted([]struct {
	weight int
	action propAction
}{
	{1, propAction{"nothing", func(*propRun) {}}},
	{5, propAction{"heartbeat", func(p *propRun) { p.do("heartbeat " + p.drawTarget()) }}},
	{4, propAction{"deliver", (*propRun).deliver}},
	{4, propAction{"schedule", func(p *propRun) { p.do("schedule") }}},
	{5, propAction{"exit", (*propRun).exit}},
	{4, propAction{"tick", func(p *propRun) { p.do("tick 1s heartbeats"); p.do("deliver") }}},
	{1, propAction{"send-heartbeat", func(p *propRun) { p.do("send-heartbeat " + p.drawTarget()) }}},
	{1, propAction{"receive-heartbeat", (*propRun).receive}},
	{1, propAction{"hang", (*propRun).hang}},
	{2, propAction{"establish", (*propRun).establish}},
	{2, propAction{"stale", (*propRun).stale}},
	{1, propAction{"cancel", (*propRun).cancel}},
	{2, propAction{"submit", (*propRun).submit}},
	{1, propAction{"forget", (*propRun).forget}},
})

// onlyTasksFail checks that every FAILED execution failed by its task.
func (p *propRun) onlyTasksFail() {
	for _, js := range p.c.state.Jobs() {
		j, _ := p.c.state.Job(js.ID)
		for _, v := range j.Vertices {
			for _, e := range v.Subtasks {
				if e.State == wire.StateFailed && !strings.HasPrefix(e.Message, "exit status") {
					p.fail("%s FAILED without its task failing: %s", e.ID, e.Message)
				}
			}
		}
	}
}

// propAction is one kind of step; weight copies of it in propActions make it
// likelier.
type propAction struct {
	name string
	run  func(*propRun)
}

// The first action of each table does nothing: rapid shrinks draws towards
// 0, so the steps a failure does not need become no-ops and drop out of the
// transcript.
var propActions = weighted([]struct {
	weight int
	action propAction
}{
	{1, propAction{"nothing", func(*propRun) {}}},
	{5, propAction{"heartbeat", func(p *propRun) { p.do("heartbeat " + p.drawTarget()) }}},
	{4, propAction{"deliver", (*propRun).deliver}},
	{4, propAction{"schedule", func(p *propRun) { p.do("schedule") }}},
	{5, propAction{"exit", (*propRun).exit}},
	{4, propAction{"tick", (*propRun).tick}},
	{3, propAction{"fault", (*propRun).fault}},
	{1, propAction{"send-heartbeat", func(p *propRun) { p.do("send-heartbeat " + p.drawTarget()) }}},
	{1, propAction{"receive-heartbeat", (*propRun).receive}},
	{1, propAction{"hang", (*propRun).hang}},
	{1, propAction{"establish", (*propRun).establish}},
	{1, propAction{"cancel", (*propRun).cancel}},
	{1, propAction{"stale", (*propRun).stale}},
	{2, propAction{"submit", (*propRun).submit}},
	{1, propAction{"forget", (*propRun).forget}},
})

func weighted(in []struct {
	weight int
	action propAction
}) []propAction {
	var out []propAction
	for _, w := range in {
		for i := 0; i < w.weight; i++ {
			out = append(out, w.action)
		}
	}
	return out
}

var propExecutors = []string{"e1", "e2", "e3"}

// propRun is one random run: the cluster and the transcript of what ran.
type propRun struct {
	t      *rapid.T
	c      *cluster
	jobs   []string
	tokens []uint64 // tokens of every leader so far
	// established is when the last leader was established: an old leader's
	// goroutines heartbeat executors only until time moves on (raft's
	// leader lease deposes a leader cut off from the others within a
	// fraction of a second, and it stops its goroutines).
	established time.Time
	log         []string
}

func newPropRun(t *rapid.T) *propRun {
	p := &propRun{t: t, c: newCluster()}
	lease := rapid.SampledFrom([]string{"", " lease=6s"}).Draw(t, "lease")
	for _, id := range propExecutors {
		// 2 or 3 slots each: at least 6, enough for any region genSpec makes.
		slots := rapid.IntRange(2, 3).Draw(t, "slots")
		p.do(fmt.Sprintf("add-executor %s slots=%d%s", id, slots, lease))
	}
	p.do("establish m1")
	p.tokens = append(p.tokens, p.c.token)
	p.established = p.c.now
	return p
}

// do runs one command line (with an optional input) and records it.
func (p *propRun) do(line string, input ...string) {
	in := strings.Join(input, "\n")
	out, err := p.c.runText(line, in)
	p.log = append(p.log, line)
	if in != "" {
		p.log = append(p.log, in)
	}
	p.log = append(p.log, "----")
	p.log = append(p.log, out...)
	p.log = append(p.log, "")
	if err != nil {
		p.fail("%s: %v", line, err)
	}
}

func (p *propRun) fail(format string, args ...any) {
	p.t.Fatalf("%s\n\ntranscript:\n%s", fmt.Sprintf(format, args...), strings.Join(p.log, "\n"))
}

func (p *propRun) check() {
	if v := p.c.inv.violations; len(v) > 0 {
		p.fail("invariant violated: %s", v[0])
	}
}

func (p *propRun) drawTarget() string {
	return rapid.SampledFrom(append([]string{"all"}, propExecutors...)).Draw(p.t, "executor")
}

func (p *propRun) submit() {
	if len(p.jobs) >= 6 {
		return
	}
	id := string(rune('a' + len(p.jobs)))
	p.jobs = append(p.jobs, id)
	p.do("submit "+id, genSpec(p.t))
}

// forget forgets an ended job and submits its id again: execution ids must
// stay unique across incarnations (an executor may still hold old ones).
func (p *propRun) forget() {
	if len(p.jobs) == 0 {
		return
	}
	id := rapid.SampledFrom(p.jobs).Draw(p.t, "job")
	p.do("forget " + id)
	if _, ok := p.c.state.Job(id); !ok {
		p.do("submit "+id, genSpec(p.t))
	}
}

func (p *propRun) deliver() {
	if t := p.drawTarget(); t == "all" {
		p.do("deliver")
	} else {
		p.do("deliver " + t)
	}
}

func (p *propRun) receive() {
	var from []string
	for _, id := range propExecutors {
		if len(p.c.execs[id].answers) > 0 {
			from = append(from, id)
		}
	}
	if len(from) == 0 {
		return
	}
	p.do("receive-heartbeat " + rapid.SampledFrom(from).Draw(p.t, "from"))
}

// running lists "executor id" for every live task on an up executor.
func (p *propRun) running() []string {
	var out []string
	for _, id := range propExecutors {
		e := p.c.execs[id]
		if e.status != up {
			continue
		}
		for _, x := range e.liveIDs() {
			out = append(out, id+" "+x)
		}
	}
	return out
}

func (p *propRun) exit() {
	r := p.running()
	if len(r) == 0 {
		return
	}
	task := rapid.SampledFrom(r).Draw(p.t, "task")
	code := rapid.SampledFrom([]int{0, 0, 0, 1}).Draw(p.t, "code")
	p.do(fmt.Sprintf("exit %s code=%d", task, code))
}

func (p *propRun) hang() {
	if r := p.running(); len(r) > 0 {
		p.do("hang " + rapid.SampledFrom(r).Draw(p.t, "task"))
	}
}

func (p *propRun) tick() {
	d := rapid.SampledFrom([]string{"500ms", "1s", "2s", "4s", "7s", "11s"}).Draw(p.t, "duration")
	if rapid.Bool().Draw(p.t, "heartbeats") {
		p.do("tick " + d + " heartbeats")
	} else {
		p.do("tick " + d)
	}
}

func (p *propRun) fault() {
	kind := rapid.SampledFrom([]string{
		"kill-executor", "restart-executor", "freeze-executor", "thaw-executor",
		"mute-executor", "unmute-executor", "drop", "drop-partition",
	}).Draw(p.t, "fault")
	ex := rapid.SampledFrom(propExecutors).Draw(p.t, "executor")
	if kind == "drop-partition" {
		if ids := p.c.execs[ex].partIDs(); len(ids) > 0 {
			p.do("drop-partition " + ex + " " + rapid.SampledFrom(ids).Draw(p.t, "partition"))
		}
		return
	}
	p.do(kind + " " + ex)
}

func (p *propRun) establish() {
	p.do("establish " + rapid.SampledFrom([]string{"m1", "m2", "m3"}).Draw(p.t, "node"))
	p.tokens = append(p.tokens, p.c.token)
	p.established = p.c.now
}

func (p *propRun) cancel() {
	if len(p.jobs) > 0 {
		p.do("cancel " + rapid.SampledFrom(p.jobs).Draw(p.t, "job"))
	}
}

// stale plays a goroutine of an earlier leader still at work.
func (p *propRun) stale() {
	if len(p.tokens) < 2 {
		return
	}
	tok := rapid.SampledFrom(p.tokens[:len(p.tokens)-1]).Draw(p.t, "stale token")
	switch rapid.IntRange(0, 2).Draw(p.t, "stale command") {
	case 0:
		p.do(fmt.Sprintf("schedule token=%d", tok))
	case 1:
		if p.c.now.Equal(p.established) {
			p.do(fmt.Sprintf("heartbeat %s token=%d", rapid.SampledFrom(propExecutors).Draw(p.t, "executor"), tok))
		}
	default:
		if len(p.jobs) > 0 {
			p.do(fmt.Sprintf("cancel %s token=%d", rapid.SampledFrom(p.jobs).Draw(p.t, "job"), tok))
		}
	}
}

// quiesce stops the faults and runs the cluster until every job has ended
// and nothing is left on the executors: every task that is expected ends
// well (exit 0), every stale one is cancelled by the heartbeats.
func (p *propRun) quiesce() {
	p.log = append(p.log, "# faults stop", "")
	for _, id := range propExecutors {
		switch p.c.execs[id].status {
		case down:
			p.do("restart-executor " + id)
		case frozen:
			p.do("thaw-executor " + id)
		}
		if p.c.execs[id].muted {
			p.do("unmute-executor " + id)
		}
	}
	for _, id := range propExecutors {
		for len(p.c.execs[id].answers) > 0 {
			p.do("receive-heartbeat " + id)
		}
	}
	const rounds = 60
	for i := 0; i < rounds; i++ {
		if p.quiet() {
			return
		}
		p.do("schedule")
		p.do("deliver")
		p.do("heartbeat all")
		p.check()
		for _, id := range propExecutors {
			e := p.c.execs[id]
			expected := map[string]bool{}
			for _, x := range p.c.state.Expected(id) {
				expected[x.ID] = true
			}
			for _, x := range e.liveIDs() {
				if expected[x] || e.held[x].state == wire.StateCanceling {
					p.do(fmt.Sprintf("exit %s %s code=0", id, x))
				}
			}
		}
		p.do("tick 1s heartbeats")
		p.check()
	}
	p.fail("not quiescent after %d rounds without faults", rounds)
}

// quiet reports whether every job has ended and nothing is left: no live
// execution in the FSM, nothing held, nothing in flight.
func (p *propRun) quiet() bool {
	for _, j := range p.c.state.Jobs() {
		if !j.Status.Terminal() {
			return false
		}
	}
	if len(p.c.state.ExecutorsWithWork()) > 0 {
		return false
	}
	for _, id := range propExecutors {
		e := p.c.execs[id]
		if len(e.held) > 0 || len(e.inbox) > 0 || len(e.answers) > 0 || len(e.parts) > 0 {
			return false
		}
	}
	return p.c.state.NumPartitions() == 0
}

// genSpec draws a small job spec: up to three vertices with pipelined or
// blocking inputs from earlier ones, sometimes a second slot sharing group,
// one of the restart strategies and failover scopes.
func genSpec(t *rapid.T) string {
	type input struct {
		From         string `json:"from"`
		Mode         string `json:"mode"`
		Distribution string `json:"distribution,omitempty"`
	}
	type vertex struct {
		ID          string   `json:"id"`
		Parallelism int      `json:"parallelism"`
		Command     []string `json:"command"`
		Inputs      []input  `json:"inputs,omitempty"`
		Group       string   `json:"slot_sharing_group,omitempty"`
	}
	n := rapid.IntRange(1, 3).Draw(t, "vertices")
	var vs []vertex
	for i := 0; i < n; i++ {
		v := vertex{ID: fmt.Sprintf("v%d", i), Parallelism: rapid.IntRange(1, 3).Draw(t, "parallelism"), Command: []string{"run"}}
		if i > 0 && rapid.Bool().Draw(t, "has input") {
			from := rapid.IntRange(0, i-1).Draw(t, "from")
			in := input{From: fmt.Sprintf("v%d", from), Mode: rapid.SampledFrom([]string{"pipelined", "blocking"}).Draw(t, "mode")}
			if vs[from].Parallelism == v.Parallelism && rapid.Bool().Draw(t, "forward") {
				in.Distribution = "forward"
			}
			v.Inputs = []input{in}
		}
		if rapid.IntRange(0, 3).Draw(t, "group") == 0 {
			v.Group = "g2"
		}
		vs = append(vs, v)
	}
	restart := rapid.SampledFrom([]string{
		`{"strategy": "none"}`,
		`{"strategy": "fixed-delay", "attempts": 2, "delay": "1s"}`,
		`{"strategy": "fixed-delay", "attempts": 6, "delay": "0s"}`,
		`{"strategy": "failure-rate", "max_failures": 3, "interval": "10s", "delay": "500ms"}`,
		`{"strategy": "exponential-delay", "initial_delay": "500ms", "max_delay": "2s"}`,
	}).Draw(t, "restart")
	spec := struct {
		Vertices []vertex        `json:"vertices"`
		Restart  json.RawMessage `json:"restart"`
		Failover string          `json:"failover"`
	}{vs, json.RawMessage(restart), rapid.SampledFrom([]string{"region", "full"}).Draw(t, "failover")}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInvariantsCanFail checks that the executor-side invariants report
// what they should and excuse only what they should: a property test whose
// checks cannot fail would prove nothing.
func TestInvariantsCanFail(t *testing.T) {
	setup := func(t *testing.T) *cluster {
		c := newCluster()
		for _, line := range []string{"add-executor e1 slots=1", "add-executor e2 slots=1", "establish m1"} {
			mustRun(t, c, line, "")
		}
		mustRun(t, c, "submit a", `{"vertices": [{"id": "v", "parallelism": 1, "command": ["run"]}]}`)
		for _, line := range []string{"heartbeat all", "schedule", "deliver", "heartbeat all"} {
			mustRun(t, c, line, "")
		}
		// An older attempt of a/v/0 appears on e2, as a stale deployment
		// would start it.
		c.execs["e2"].held["a/v/0/7"] = &task{id: "a/v/0/7", state: wire.StateRunning}
		return c
	}
	t.Run("two live attempts", func(t *testing.T) {
		c := setup(t)
		c.inv.checkExecutors(c)
		if len(c.inv.violations) != 1 || !strings.HasPrefix(c.inv.violations[0], "two live attempts of a/v/0") {
			t.Fatalf("violations: %q", c.inv.violations)
		}
	})
	t.Run("on an executor declared lost", func(t *testing.T) {
		c := setup(t)
		c.execs["e2"].lostAt = c.state.Index()
		c.inv.checkExecutors(c)
		if len(c.inv.violations) != 0 {
			t.Fatalf("violations: %q", c.inv.violations)
		}
	})
	t.Run("being cancelled", func(t *testing.T) {
		c := setup(t)
		c.execs["e2"].held["a/v/0/7"].state = wire.StateCanceling
		c.inv.checkExecutors(c)
		if len(c.inv.violations) != 0 {
			t.Fatalf("violations: %q", c.inv.violations)
		}
	})
	t.Run("FSM observations", func(t *testing.T) {
		c := newCluster()
		x := fsm.Execution{ID: "a/v/0/0", Job: "a", Vertex: "v", State: wire.StateFailed}
		c.inv.observeExecution(c, x)
		x.State = wire.StateRunning
		c.inv.observeExecution(c, x) // a terminal state changed
		y := fsm.Execution{ID: "a/v/0/2", Job: "a", Vertex: "v", Attempt: 2, State: wire.StateScheduled}
		c.inv.observeExecution(c, y) // attempt 1 skipped, attempt 0 live
		if len(c.inv.violations) != 2 {
			t.Fatalf("violations: %q", c.inv.violations)
		}
	})
	t.Run("unknown left running after a heartbeat", func(t *testing.T) {
		c := setup(t)
		e := c.execs["e2"]
		c.inv.checkAfterHeartbeat(c, e, e.report().Executions)
		if len(c.inv.violations) != 1 || !strings.Contains(c.inv.violations[0], "e2 still runs a/v/0/7") {
			t.Fatalf("violations: %q", c.inv.violations)
		}
	})
}

func mustRun(t *testing.T, c *cluster, line, input string) {
	t.Helper()
	if _, err := c.runText(line, input); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
}
