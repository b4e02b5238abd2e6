package leader

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"jobmaster/fsm"
	"jobmaster/placement"
	"jobmaster/wire"
)

// Config is the leader's timing.
type Config struct {
	// Heartbeat is the interval between heartbeat waves.
	Heartbeat time.Duration
	// Timeout is how long an executor may stay silent before it is lost.
	Timeout time.Duration
	// Lease is the executors' lease as configured on the master; an
	// executor's own, once it reports it, counts if it is longer.
	Lease time.Duration
	// RPCTimeout bounds one heartbeat request (HeartbeatRPCTimeout): a
	// heartbeat renews a lease at most this long after it was sent.
	RPCTimeout time.Duration
	// AckDeadline is how long a deployment may stay unacknowledged.
	AckDeadline time.Duration
	// MinRestartDelay is the least time between a job's failure and the
	// restart of its regions, whatever its restart strategy's delay (0:
	// none): a job with a delay of 0s and unlimited attempts does not
	// restart in a tight loop.
	MinRestartDelay time.Duration
	// Placement is how a scheduling pass chooses executors for new slots
	// (placement.Spread, the zero value, or placement.Pack).
	Placement placement.Policy
}

// HeartbeatRPCTimeout is how long the leader waits for the answer to a
// heartbeat sent every interval: two intervals, at most 2 s.
func HeartbeatRPCTimeout(interval time.Duration) time.Duration {
	return min(2*time.Second, 2*interval)
}

// MinTimeout is the shortest executor timeout that is safe with executors
// whose lease is lease: the leader renews a lease only while the executor
// has been silent for less than timeout - lease - RPC timeout (see probe),
// a window that must hold at least two heartbeats. Otherwise a lost executor
// may still run a task when its replacement starts.
func (c Config) MinTimeout(lease time.Duration) time.Duration {
	return lease + c.RPCTimeout + 2*c.Heartbeat
}

// Reader runs fn with the replicated state under a read lock; fn must not
// keep references into it. fsm.FSM.Read is one; a test passes its own state.
type Reader func(fn func(*fsm.State))

// Core is one session's decisions and the executor table they use.
type Core struct {
	cfg   Config
	token uint64

	mu       sync.Mutex
	execs    map[string]*executor
	lastTick time.Time
}

// New returns the core of the session whose fencing token is token,
// starting at now with an empty executor table (Refresh fills it).
func New(cfg Config, token uint64, now time.Time) *Core {
	return &Core{cfg: cfg, token: token, execs: make(map[string]*executor), lastTick: now}
}

// Token is the session's fencing token.
func (c *Core) Token() uint64 { return c.token }

// fenced stamps a command with the session's token and the time.
func (c *Core) fenced(now time.Time) fsm.Fenced {
	return fsm.Fenced{Token: c.token, Time: now.UnixMilli()}
}

// Ready is what one decision asks the leader to do; the package doc gives
// the order.
type Ready struct {
	// Propose is the commands to commit, in one batch.
	Propose []fsm.Command
	// Cancel, Deploy and Release are the requests to send to executors.
	Cancel  []Cancel
	Deploy  []Deploy
	Release []Release
	// Executor is the executor a report came from, and Ack the terminal
	// executions it may forget.
	Executor string
	Ack      []string
	// Kick wakes the scheduler.
	Kick bool
	// Changes are executors whose liveness changed, and Events what else to
	// log.
	Changes []Change
	Events  []Event
	// Tally counts what the Ready does, for the masters' metrics.
	Tally Tally

	// What Committed does once Propose is committed.
	kickOnCommit bool
	lost         []string // executors whose loss Propose records
	pending      Tally    // counts that hold once Propose is committed
}

// Empty reports whether r asks for nothing.
func (r *Ready) Empty() bool {
	return len(r.Propose)+len(r.Cancel)+len(r.Deploy)+len(r.Release)+len(r.Ack)+len(r.Changes)+len(r.Events) == 0 && !r.Kick
}

// Cancel asks an executor to stop executions.
type Cancel struct {
	Executor string
	IDs      []string
}

// Release asks an executor to delete partitions nobody needs.
type Release struct {
	Executor string
	IDs      []string
}

// Deploy asks an executor to run tasks. Redeploy marks a deployment sent
// again because it is still unacknowledged.
type Deploy struct {
	Executor string
	Tasks    []fsm.TaskSpec
	Redeploy bool
}

// Change is an executor's liveness changing.
type Change struct {
	Executor string
	From, To Status
	// Silent is how long it had not answered.
	Silent time.Duration
}

// Event is something to log: a level, a message and slog key-value pairs.
type Event struct {
	Level slog.Level
	Msg   string
	Args  []any
}

func (r *Ready) event(level slog.Level, msg string, args ...any) {
	r.Events = append(r.Events, Event{Level: level, Msg: msg, Args: args})
}

// Committed returns r completed with what follows from its proposal's
// results (one per command of Propose, in order): the deployments of the
// executions placed, the acks of terminal states recorded, executors marked
// lost, a kick. The returned Ready has nothing left to propose.
func (c *Core) Committed(read Reader, r Ready, results []fsm.Result) Ready {
	var placed []fsm.Execution
	r.Tally.committed(r.Propose, results, r.pending)
	r.pending = Tally{}
	for i, cmd := range r.Propose {
		if i >= len(results) {
			break
		}
		res := results[i]
		r.Ack = append(r.Ack, res.Terminal...)
		switch cmd := cmd.(type) {
		case *fsm.PlaceRegion:
			if res.Err != nil {
				r.event(slog.LevelDebug, "placement rejected", "job", cmd.Job, "region", cmd.Region, "err", res.Err)
				continue
			}
			placed = append(placed, res.Placed...)
		case *fsm.FailExecutions:
			r.event(slog.LevelWarn, "executions failed", "executor", cmd.Executor, "executions", cmd.IDs, "reason", cmd.Reason)
		case *fsm.RestartRegions:
			var why string
			read(func(st *fsm.State) { why = st.JobMessage(cmd.Job) })
			r.event(slog.LevelInfo, "restarting", "job", cmd.Job, "why", why)
		case *fsm.ForgetJobs:
			if len(cmd.IDs) > 0 {
				r.event(slog.LevelInfo, "forgot ended jobs", "jobs", len(cmd.IDs))
			}
		case *fsm.ExecutorLost:
			ended := endedExecutions(res.Events())
			r.event(slog.LevelWarn, "executor lost: its executions ended", "executor", cmd.Executor, "ended", len(ended), "executions", ended[:min(len(ended), maxLoggedIDs)])
		case *fsm.LosePartitions:
			r.event(slog.LevelWarn, "partitions lost", "executor", cmd.Executor, "executions", cmd.IDs, "reason", cmd.Reason)
		}
	}
	r.Propose = nil
	if len(r.lost) > 0 {
		c.markLost(r.lost)
		r.lost = nil
	}
	if r.kickOnCommit {
		r.Kick, r.kickOnCommit = true, false
	}
	if len(placed) > 0 {
		r.Deploy = append(r.Deploy, deploysOf(read, placed)...)
	}
	return r
}

// maxLoggedIDs bounds the execution ids a log line lists (its count says
// how many there were).
const maxLoggedIDs = 10

// endedExecutions are the executions events say ended (failed, or
// cancelled: one a restart was stopping already).
func endedExecutions(evs []fsm.Event) []string {
	var ids []string
	for _, e := range evs {
		if e.Type == fsm.EventExecutionState && wire.State(e.State).Terminal() {
			ids = append(ids, e.Execution)
		}
	}
	return ids
}

// Failed is what remains of r when its proposal failed: only what needed no
// commit (acks of terminal states the leader does not expect, and what to
// log). A later report or tick decides the rest again, and counts it then.
func Failed(r Ready) Ready {
	return Ready{Executor: r.Executor, Ack: r.Ack, Events: r.Events}
}

// deploysOf groups placed executions into one deployment per executor, in
// the order the executors first appear.
func deploysOf(read Reader, placed []fsm.Execution) []Deploy {
	// Each deployment's tasks are counted first and filled in place: a
	// wide region's ten thousand tasks are hundreds of bytes each.
	at := make(map[string]int)
	var out []Deploy
	var counts []int
	which := make([]int, len(placed))
	for i := range placed {
		ex := placed[i].Executor
		k, ok := at[ex]
		if !ok {
			k = len(out)
			at[ex] = k
			out = append(out, Deploy{Executor: ex})
			counts = append(counts, 0)
		}
		counts[k]++
		which[i] = k
	}
	for k := range out {
		out[k].Tasks = make([]fsm.TaskSpec, 0, counts[k])
	}
	read(func(st *fsm.State) {
		st.EachTaskSpec(placed, func(i int, ts *fsm.TaskSpec) {
			k := which[i]
			out[k].Tasks = append(out[k].Tasks, *ts)
		})
	})
	return slices.DeleteFunc(out, func(d Deploy) bool { return len(d.Tasks) == 0 })
}
