package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"
)

// FaultKind is one kind of fault the nemesis injects.
type FaultKind string

// The fault kinds. Each is injected, held, then healed before the next
// one starts (faults do not overlap, so each violation can be traced to
// the fault around it).
const (
	// KillLeader: SIGKILL the leader, restart it after Hold.
	KillLeader FaultKind = "kill-leader"
	// KillMaster: SIGKILL a master picked at random (maybe the leader),
	// restart it after Hold.
	KillMaster FaultKind = "kill-master"
	// PauseLeader: SIGSTOP the leader for Hold, then SIGCONT: a stale
	// leader that wakes up believing it still leads.
	PauseLeader FaultKind = "pause-leader"
	// KillExecutor: SIGKILL an executor, restart it on its data dir.
	KillExecutor FaultKind = "kill-executor"
	// WipeExecutor: SIGKILL an executor, delete its data dir, restart it.
	WipeExecutor FaultKind = "kill-executor-wipe"
	// FreezeExecutor: SIGSTOP an executor and every process below it (its
	// tasks) until the leader declares it lost, Hold more, then SIGCONT.
	FreezeExecutor FaultKind = "freeze-executor"
	// PartitionMaster: cut a master picked at random off from every other
	// node (masters and executors) for Hold.
	PartitionMaster FaultKind = "partition-master"
	// PartitionExecutor: cut an executor off from every master for Hold.
	PartitionExecutor FaultKind = "partition-executor"
	// PartitionLeader: cut the leader off from the other masters, but not
	// from the executors, for Hold.
	PartitionLeader FaultKind = "partition-leader"
)

// AllFaults lists every kind, in report order.
var AllFaults = []FaultKind{KillLeader, KillMaster, PauseLeader, KillExecutor, WipeExecutor,
	FreezeExecutor, PartitionMaster, PartitionExecutor, PartitionLeader}

// NeedsNetns reports whether the kind cuts links (network namespaces).
func (k FaultKind) NeedsNetns() bool {
	return k == PartitionMaster || k == PartitionExecutor || k == PartitionLeader
}

// OnExecutor reports whether the kind strikes an executor (the others
// strike masters only).
func (k FaultKind) OnExecutor() bool {
	return k == KillExecutor || k == WipeExecutor || k == FreezeExecutor || k == PartitionExecutor
}

// holdRange is how long each kind lasts (for a kill: how long the node
// stays down; for a freeze: how long after the executor was declared lost).
var holdRange = map[FaultKind][2]time.Duration{
	KillLeader:        {200 * time.Millisecond, 4 * time.Second},
	KillMaster:        {200 * time.Millisecond, 4 * time.Second},
	PauseLeader:       {500 * time.Millisecond, 5 * time.Second},
	KillExecutor:      {0, 3 * time.Second},
	WipeExecutor:      {0, 3 * time.Second},
	FreezeExecutor:    {0, 2 * time.Second},
	PartitionMaster:   {2 * time.Second, 8 * time.Second},
	PartitionExecutor: {time.Second, 10 * time.Second}, // across the lease (5 s) and timeout (7 s)
	PartitionLeader:   {2 * time.Second, 8 * time.Second},
}

// Fault is one step of a schedule.
type Fault struct {
	Kind FaultKind
	// Pick chooses the target among the candidates (modulo their number)
	// when the kind does not name it (the leader).
	Pick  int
	Hold  time.Duration
	Pause time.Duration // quiet time after the fault is healed
}

func (f Fault) String() string {
	return fmt.Sprintf("%-19s hold %-6s then pause %-6s (pick %d)", f.Kind, f.Hold.Round(10*time.Millisecond),
		f.Pause.Round(10*time.Millisecond), f.Pick)
}

// Schedule is the nemesis's plan from a seed: the same seed and kinds give
// the same faults, targets (by pick) and durations. The first len(kinds)
// faults are every kind once, in a seeded order; the rest are drawn at
// random. maxPause bounds the pause after each fault.
func Schedule(seed uint64, kinds []FaultKind, n int, maxPause time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973)) // "nemesis"
	dur := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	order := append([]FaultKind(nil), kinds...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	out := make([]Fault, 0, n)
	for i := 0; i < n && len(kinds) > 0; i++ {
		k := kinds[rng.IntN(len(kinds))]
		if i < len(order) {
			k = order[i]
		}
		r := holdRange[k]
		out = append(out, Fault{Kind: k, Pick: rng.IntN(1 << 20), Hold: dur(r[0], r[1]),
			Pause: dur(maxPause/3, maxPause)})
	}
	return out
}

// FaultEvent is what the nemesis did, for the report and the checker.
type FaultEvent struct {
	Fault
	Target   string
	Start    time.Time
	Healed   time.Time // the fault was undone (the pause follows)
	End      time.Time
	Skipped  string // why the fault was not injected
	Note     string
	Frozen   *FrozenSpan
	Problems []string // the cluster misbehaved while healing (e.g. never declared the executor lost)
}

// nemesis carries a schedule out against a cluster.
type nemesis struct {
	c      *Cluster
	lease  time.Duration
	logf   func(format string, args ...any)
	mu     sync.Mutex
	events []FaultEvent
	// generation counts wipes per executor (for the token samples).
	generation map[string]int
}

func newNemesis(c *Cluster, lease time.Duration, logf func(string, ...any)) *nemesis {
	return &nemesis{c: c, lease: lease, logf: logf, generation: map[string]int{}}
}

func (n *nemesis) gen(executor string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.generation[executor]
}

// Events returns what the nemesis did so far.
func (n *nemesis) Events() []FaultEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]FaultEvent(nil), n.events...)
}

// currentLeader asks the running masters (?stale) who leads, and returns
// the leader when it runs and is not paused. Bounded by timeout.
func (c *Cluster) currentLeader(timeout time.Duration) *Node {
	deadline := time.Now().Add(timeout)
	for {
		for _, m := range c.Masters {
			if !m.Running() || m.Paused() {
				continue
			}
			var cl struct {
				Leader *string `json:"leader"`
			}
			if c.getJSON(c.URL(m.HTTPAddr, "/v1/cluster?stale"), &cl) == nil && cl.Leader != nil {
				if l := c.Node(*cl.Leader); l != nil && l.Running() && !l.Paused() {
					return l
				}
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// executorStatus is the status the current leader gives an executor.
func (c *Cluster) executorStatus(id string) string {
	l := c.currentLeader(time.Second)
	if l == nil {
		return ""
	}
	var cl struct {
		Executors []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"executors"`
	}
	if c.getJSON(c.URL(l.HTTPAddr, "/v1/cluster"), &cl) != nil {
		return ""
	}
	for _, e := range cl.Executors {
		if e.ID == id {
			return e.Status
		}
	}
	return ""
}

// awaitLost waits until the leader declares a frozen executor lost.
func (c *Cluster) awaitLost(id string, timeout time.Duration, stop <-chan struct{}) (bool, string) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c.executorStatus(id) == "lost" {
			return true, "status lost"
		}
		if !sleepOrStop(20*time.Millisecond, stop) {
			break
		}
	}
	return false, ""
}

// sleepOrStop waits d unless stop closes first.
func sleepOrStop(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// Run injects one fault, holds it, heals it, and pauses.
func (n *nemesis) Run(f Fault, stop <-chan struct{}) FaultEvent {
	c := n.c
	ev := FaultEvent{Fault: f, Start: time.Now()}
	defer func() {
		ev.End = time.Now()
		n.mu.Lock()
		n.events = append(n.events, ev)
		n.mu.Unlock()
		msg := ev.Note
		if ev.Skipped != "" {
			msg = "skipped: " + ev.Skipped
		}
		n.logf("nemesis: %s on %s: %s", f.Kind, ev.Target, msg)
	}()
	if f.Kind.NeedsNetns() && c.Net == nil {
		ev.Skipped = "no network namespaces"
		return ev
	}
	pickOf := func(nodes []*Node) *Node { return nodes[f.Pick%len(nodes)] }
	leader := func() *Node {
		l := c.currentLeader(15 * time.Second)
		if l == nil {
			ev.Skipped = "no leader to target within 15s"
		}
		return l
	}
	var target *Node
	switch f.Kind {
	case KillLeader, PauseLeader, PartitionLeader:
		target = leader()
	case KillMaster, PartitionMaster:
		target = pickOf(c.Masters)
	default:
		target = pickOf(c.Executors)
	}
	if target == nil {
		return ev
	}
	ev.Target = target.ID
	if !target.Running() {
		ev.Skipped = target.ID + " is not running"
		return ev
	}
	switch f.Kind {
	case KillLeader, KillMaster, KillExecutor, WipeExecutor:
		target.Kill()
		sleepOrStop(f.Hold, stop)
		if f.Kind == WipeExecutor {
			_ = os.RemoveAll(target.DataDir)
			n.mu.Lock()
			n.generation[target.ID]++
			n.mu.Unlock()
		}
		target.Start()
		ev.Note = fmt.Sprintf("down for %s", f.Hold.Round(time.Millisecond))
	case PauseLeader:
		target.Pause()
		sleepOrStop(f.Hold, stop)
		target.Resume()
		ev.Note = fmt.Sprintf("stopped for %s", f.Hold.Round(time.Millisecond))
	case FreezeExecutor:
		pids := target.Freeze()
		from := time.Now()
		lost, how := c.awaitLost(target.ID, 30*time.Second, stop)
		declared := time.Since(from)
		sleepOrStop(f.Hold, stop)
		to := time.Now()
		target.Thaw(pids)
		span := &FrozenSpan{Executor: target.ID, Span: Span{from.UnixNano(), to.UnixNano()}, LeaseLost: to.Sub(from) > n.lease}
		ev.Frozen = span
		ev.Note = fmt.Sprintf("%d processes frozen for %s", len(pids), to.Sub(from).Round(time.Millisecond))
		if lost {
			ev.Note += fmt.Sprintf(", declared lost after %s (%s)", declared.Round(time.Millisecond), how)
		} else {
			ev.Problems = append(ev.Problems, fmt.Sprintf("the leader did not declare frozen executor %s lost within %s", target.ID, declared.Round(time.Second)))
		}
	case PartitionMaster, PartitionExecutor, PartitionLeader:
		var peers []*Node
		switch f.Kind {
		case PartitionMaster:
			peers = append(append(peers, c.Masters...), c.Executors...)
		case PartitionExecutor:
			peers = c.Masters
		case PartitionLeader:
			peers = c.Masters
		}
		var cut []string
		for _, p := range peers {
			if p == target {
				continue
			}
			if err := c.Net.Cut(target.ID, p.ID); err != nil {
				ev.Problems = append(ev.Problems, "cut: "+err.Error())
				continue
			}
			cut = append(cut, p.ID)
		}
		sleepOrStop(f.Hold, stop)
		if err := c.Net.Heal(); err != nil {
			ev.Problems = append(ev.Problems, "heal: "+err.Error())
		}
		ev.Note = fmt.Sprintf("cut from %s for %s", strings.Join(cut, ","), f.Hold.Round(time.Millisecond))
	}
	ev.Healed = time.Now()
	sleepOrStop(f.Pause, stop)
	return ev
}

// HealAll undoes whatever is still in effect: cuts, pauses, freezes and
// stopped nodes.
func (n *nemesis) HealAll() {
	c := n.c
	if c.Net != nil {
		_ = c.Net.Heal()
	}
	for _, node := range append(append([]*Node{}, c.Masters...), c.Executors...) {
		if frozen := node.FrozenPids(); frozen != nil {
			node.Thaw(frozen)
		} else if node.Paused() {
			node.Resume()
		}
		if !node.Running() {
			node.Start()
		}
	}
}
