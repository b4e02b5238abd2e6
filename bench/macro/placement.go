package macro

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"jobmaster/api"
	"jobmaster/bench/cluster"
	"jobmaster/bench/fleet"
	"jobmaster/bench/results"
	"jobmaster/client"
	"jobmaster/transport"
)

// Placement measures subtasks placed and running per second with sim
// executors hosted in child processes (a fleet of n executors with
// fleetSlots(n) slots each, executorsPerProc to a process), each fleet
// given one job of 10,000 subtasks (one pipelined region: all or nothing)
// and then 1,000 jobs of 10.
//
// From when the first PUT is sent: "placed" is the latest placement time
// the FSM recorded, and "running" the latest time it recorded a subtask
// RUNNING (both exact to the millisecond, the leader's clock, on the same
// machine as this one). The wait ends when a follower's state, polled every
// 50 ms, shows every subtask started; that moment is kept as "observed"
// (it adds the poll's interval and the follower's lag). Sim subtasks run
// for 5 s; the next case waits until they have finished.
//
// Each fleet also measures the heartbeat load: the CPU and RSS of the
// leader over a window before the fleet starts, with every executor idle
// (once the fleet's process has settled, before any job),
// and with 10,000 executions running. The 100-executor fleet also measures
// the cancellation of a running job of 10,000 subtasks.
func Placement(ctx context.Context, e *Env) error {
	fleets := e.Fleets
	if len(fleets) == 0 {
		fleets = []int{100, 1000}
	}
	var errs []error
	for _, n := range fleets {
		if err := placementFleet(ctx, e, n, fleetSlots(n)); err != nil {
			if ctx.Err() != nil {
				return err
			}
			// A fleet that cannot run says nothing about the next one.
			e.Log("placement with %d executors: %v", n, err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fleetSlots is how many slots each of a fleet of n executors offers: a
// tenth more than 10,000 subtasks need. The leader gives new work only to
// executors that answered their last heartbeats in time; with exactly
// 10,000 slots the wide job, all or nothing, waits while any one of a
// thousand executors on a busy machine is late, and in one full run
// (2026-12-06) it waited out the minute with none placed.
func fleetSlots(n int) int { return max(1, 11_000/n) }

// joinRate is how many sim executors start per second, startDeadline how
// long starting them may take, and convergeWait how long the fleet may then
// take until the leader has heard from every executor. Sim subtasks run for
// simDuration.
//
// Forming a gossip cluster of a thousand members costs work that grows
// faster than the members (every join is broadcast to all), and on this
// shared machine the fleet's processes get what the rest of the host
// leaves them. At 100 joins a second the masters' gossip ports fell behind
// (joins timed out mid push-pull and were retried), the masters starved
// and re-elected, and no figure came out; at 20 a second (50 s for a
// thousand) the fleet converged. The deadlines are generous so that the
// fleet converges in every run; the time it took is a figure of its own.
const (
	joinRate      = 20
	startDeadline = 3 * time.Minute
	convergeWait  = 2 * time.Minute
	simDuration   = 5 * time.Second
)

// fleetProcs is how many processes host a fleet of n sim executors: one
// per executorsPerProc. A thousand gossip members, HTTP servers and heaps
// in one process on a busy 2-core machine did not converge in every run
// (the process got a small share of the CPU, and its garbage collector
// stopped all of them at once); in several they do, and the leader still
// sees a thousand executors, each with its own gossip node and address.
func fleetProcs(n int) int { return max(1, n/executorsPerProc) }

// executorsPerProc is how many sim executors share one fleet process.
const executorsPerProc = 250

// waitHeard waits until every executor the leader knows (n of them) has
// accepted the leader's heartbeats.
func waitHeard(ctx context.Context, l cluster.Leader, n int) error {
	var v api.Cluster
	if err := cluster.GetJSON(ctx, transport.URL(cluster.HTTP, l.Node.HTTPAddr, "/v1/cluster"), &v); err != nil {
		return err
	}
	var addrs []string
	for _, x := range v.Executors {
		addrs = append(addrs, x.HTTPAddr)
	}
	if len(addrs) < n {
		return fmt.Errorf("the leader knows %d of %d executors", len(addrs), n)
	}
	return fleet.WaitHeard(ctx, addrs, l.Token)
}

func placementFleet(ctx context.Context, e *Env, n, slots int) error {
	name := fmt.Sprintf("placement-%d", n)
	c, err := e.StartCluster(ctx, name)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := c.WaitLeader(ctx)
	if err != nil {
		return err
	}
	window := 20 * time.Second
	if e.Quick {
		window = 5 * time.Second
	}
	// The leader's own cost with no executor: Raft, gossip with the other
	// masters, the leader's loops.
	base := masterWatch(c, l, nil)
	if err := sleep(ctx, window/2); err != nil {
		return err
	}
	addHeartbeatFigure(e, n, "before the fleet starts (no executor)", base.stop(), window/2, false)

	t0 := time.Now()
	fl, err := fleet.Spawn(e.Exe, fleet.HostConfig{N: n, Slots: slots, Prefix: "sim",
		Dir: filepath.Join(e.Dir, name+"-fleet"), Join: c.GossipAddrs(), PerSecond: joinRate, Procs: fleetProcs(n)})
	if err != nil {
		return err
	}
	defer fl.Kill()
	startCPU := watchCPU(fleetNames(fl.Pids()), fl.Pids())
	sctx, scancel := context.WithTimeout(ctx, startDeadline)
	err = fl.WaitReady(sctx)
	scancel()
	if err != nil {
		return fleetDiverged(ctx, e, c, l, fl, n, time.Since(t0), fmt.Errorf("starting %d sim executors within %s: %w", n, startDeadline, err))
	}
	started := time.Since(t0)
	wctx, cancel := context.WithTimeout(ctx, convergeWait)
	err = c.WaitExecutors(wctx, n)
	if err == nil {
		err = waitHeard(wctx, l, n)
	}
	cancel()
	if err != nil {
		return fleetDiverged(ctx, e, c, l, fl, n, started, err)
	}
	up := time.Since(t0)
	joinCPU := startCPU.stop()
	e.Log("%s: %d sim executors started in %s, all heartbeated after %s (their process used %.2f cores meanwhile)",
		name, n, started.Round(time.Millisecond), up.Round(time.Millisecond), joinCPU["fleet_cpu_cores"])
	e.Run.Add(results.Figure{Group: "sim fleet", Name: fmt.Sprintf("%d executors: start until all heartbeated", n), Value: up.Seconds(), Unit: "s",
		Extra: map[string]float64{"started_s": started.Seconds()}, Command: Command("placement"),
		Note: fmt.Sprintf("sim executors in %d child process(es), each executor with its own gossip node, %d started per second", fleetProcs(n), joinRate)})

	// A fleet that has just converged is still working through the join
	// gossip of its members; measure once its process has calmed down.
	settled, fleetCPU := settle(ctx, fl.Pids(), 0.5, 90*time.Second)
	e.Log("%s: the fleet's process settled after %s (%.2f cores over the last 2 s)", name, settled.Round(time.Second), fleetCPU)

	clients, tr, err := Clients(c, 64)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	poll := c.Followers(l)[0]

	if err := idleLoad(ctx, e, c, l, n, window, fl.Pids()); err != nil {
		return err
	}

	shapes := []struct {
		name        string
		jobs, width int
	}{{"1 job x 10000", 1, 10_000}, {"1000 jobs x 10", 1000, 10}}
	for si, sh := range shapes {
		ids := jobIDs(fmt.Sprintf("place-%d-%d", n, si), sh.jobs)
		pr, err := placeShape(ctx, c, poll, clients, ids, sh.width, simDuration, l, fl.Pids())
		if err != nil {
			// The fleet cannot keep up: what was measured stays (the idle
			// heartbeat load came first), the rest of this fleet is
			// skipped (its cluster is killed) so that the run stays
			// within its time.
			e.Log("%s %s: %v; skipping the rest of this fleet", name, sh.name, err)
			return fmt.Errorf("%s %s: %w", name, sh.name, err)
		}
		total := float64(sh.jobs * sh.width)
		extra := map[string]float64{
			"placed_s":     pr.placed.Seconds(),
			"running_s":    pr.running.Seconds(),
			"observed_s":   pr.observed.Seconds(),
			"placed_per_s": total / pr.placed.Seconds(),
			"submit_s":     pr.submitted.Seconds(),
		}
		maps.Copy(extra, keep(pr.cpu, "leader_cpu", "follower", "bench_cpu", "fleet_cpu"))
		extra["cpu_us_per_subtask"] = cpuSeconds(pr.cpu, pr.window) / total * 1e6
		e.Run.Add(results.Figure{Group: "placement", Name: fmt.Sprintf("%d sim executors, %s", n, sh.name),
			Value: total / pr.running.Seconds(), Unit: "subtasks/s", Extra: extra, Command: Command("placement"),
			Note: "PUT to the last subtask recorded RUNNING in the replicated state (leader's clock)"}).AtLeast(50_000, ">= 50000 subtasks/s")
		e.Log("%s %s: placed in %s (%.0f/s), running in %s (%.0f/s)", name, sh.name,
			pr.placed.Round(time.Millisecond), total/pr.placed.Seconds(), pr.running.Round(time.Millisecond), total/pr.running.Seconds())
		if err := waitEnded(ctx, poll, ids, simDuration+time.Minute); err != nil {
			return err
		}
	}
	if n == 100 {
		if err := cancelWide(ctx, e, c, poll, clients, l, n, fl.Pids()); err != nil {
			return err
		}
	}
	return busyLoad(ctx, e, c, l, poll, clients, n, window, fl.Pids())
}

// fleetDiverged records a fleet that did not converge: how many executors
// the leader sees alive and what the fleet costs this process.
func fleetDiverged(ctx context.Context, e *Env, c *cluster.Cluster, l cluster.Leader, fl *fleet.Process, n int, after time.Duration, cause error) error {
	w := masterWatch(c, l, fl.Pids())
	_ = sleep(ctx, 5*time.Second)
	cpu := w.stop()
	statuses, _ := executorStatuses(ctx, l)
	alive := statuses["alive"]
	extra := keep(cpu, "fleet_", "leader_")
	extra["after_s"] = after.Seconds()
	extra["started"] = float64(fl.Started())
	e.Run.Add(results.Figure{Group: "sim fleet", Name: fmt.Sprintf("%d executors: alive at the leader when the fleet gave up", n),
		Value: float64(alive), Unit: "executors", Extra: extra, Command: Command("placement"),
		Note: "the fleet did not converge: the figures that need it are missing (see docs/BENCHMARKS.md)"})
	e.Log("placement-%d: fleet did not converge after %s: %d started, %d of %d alive at the leader; the fleet's process %.2f cores, %.0f MiB; leader %.2f cores",
		n, after.Round(time.Second), fl.Started(), alive, n, cpu["fleet_cpu_cores"], cpu["fleet_rss_mib"], cpu["leader_cpu_cores"])
	return fmt.Errorf("%d sim executors did not converge (%d alive at the leader): %w", n, alive, cause)
}

// cancelWide measures cancelling a running job of 10,000 subtasks: from the
// cancel request to the job CANCELED in a follower's state.
func cancelWide(ctx context.Context, e *Env, c *cluster.Cluster, poll *cluster.Node, clients []*client.Client, l cluster.Leader, n int, fleetPids []int) error {
	ids := []string{fmt.Sprintf("cancel-%d", n)}
	if _, err := placeShape(ctx, c, poll, clients, ids, 10_000, time.Hour, l, fleetPids); err != nil {
		return fmt.Errorf("cancel benchmark: %w", err)
	}
	watch := masterWatch(c, l, fleetPids)
	t0 := time.Now()
	if err := clients[0].CancelJob(ctx, ids[0]); err != nil {
		return err
	}
	if err := waitEnded(ctx, poll, ids, 3*time.Minute); err != nil {
		return err
	}
	d := time.Since(t0)
	cpu := watch.stop()
	e.Run.Add(results.Figure{Group: "placement", Name: fmt.Sprintf("cancel a running job of 10000 subtasks (%d sim executors)", n),
		Value: d.Seconds(), Unit: "s", Extra: keep(cpu, "leader_cpu", "follower1_cpu", "fleet_cpu"), Command: Command("placement"),
		Note: "cancel request to every execution CANCELED in a follower's state"})
	e.Log("placement-%d: cancelling a running job of 10000 took %s", n, d.Round(time.Millisecond))
	return nil
}

// idleLoad measures the leader's CPU and RSS with every executor idle.
func idleLoad(ctx context.Context, e *Env, c *cluster.Cluster, l cluster.Leader, n int, window time.Duration, fleetPids []int) error {
	w := masterWatch(c, l, fleetPids)
	if err := sleep(ctx, window); err != nil {
		return err
	}
	addHeartbeatFigure(e, n, "idle executors", w.stop(), window, n >= 1000)
	return nil
}

// busyLoad measures the leader's CPU and RSS with 10,000 executions running
// (10,000/n per report).
func busyLoad(ctx context.Context, e *Env, c *cluster.Cluster, l cluster.Leader, poll *cluster.Node, clients []*client.Client, n int, window time.Duration, fleetPids []int) error {
	ids := []string{fmt.Sprintf("place-%d-hb", n)}
	run := window + 10*time.Second
	if _, err := placeShape(ctx, c, poll, clients, ids, 10_000, run, l, fleetPids); err != nil {
		return fmt.Errorf("heartbeat load with %d executors: %w", n, err)
	}
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	busy := masterWatch(c, l, fleetPids)
	if err := sleep(ctx, window); err != nil {
		return err
	}
	addHeartbeatFigure(e, n, fmt.Sprintf("10000 executions running (%d per report)", 10_000/n), busy.stop(), window, n >= 1000)
	return waitEnded(ctx, poll, ids, run+time.Minute)
}

// settle waits until the processes pids use less than cores together over
// 2 s, or until limit has passed; it returns how long it waited and the
// last reading.
func settle(ctx context.Context, pids []int, cores float64, limit time.Duration) (time.Duration, float64) {
	t0 := time.Now()
	last := 0.0
	for time.Since(t0) < limit {
		w := watchCPU(namesOf("p", len(pids)), pids)
		if sleep(ctx, 2*time.Second) != nil {
			break
		}
		if last = w.stop()["p_cpu_cores"]; last < cores {
			break
		}
	}
	return time.Since(t0), last
}

// addHeartbeatFigure records the leader's CPU over a window; target says
// whether the half-core target for 1,000 executors applies.
func addHeartbeatFigure(e *Env, n int, what string, cpu map[string]float64, window time.Duration, target bool) {
	f := e.Run.Add(results.Figure{Group: "heartbeat load", Name: fmt.Sprintf("leader CPU, %d executors at 1 s, %s", n, what),
		Value: cpu["leader_cpu_cores"], Unit: "cores", Extra: keep(cpu, "leader_", "follower1_cpu", "follower2_cpu", "fleet_"), Command: Command("placement"),
		Note: fmt.Sprintf("/proc/<pid>/stat over %s; fleet_* is the process hosting the %d sim executors", window, n)})
	if target {
		f.AtMost(0.5, "< 0.5 cores")
	}
	e.Log("heartbeat load, %d executors, %s: leader %.3f cores, RSS %.0f MiB; followers %.3f + %.3f cores; sim executors %.2f cores, %.0f MiB",
		n, what, cpu["leader_cpu_cores"], cpu["leader_rss_mib"], cpu["follower1_cpu_cores"], cpu["follower2_cpu_cores"], cpu["fleet_cpu_cores"], cpu["fleet_rss_mib"])
}

type placeResult struct {
	submitted, placed, running, observed time.Duration
	// window is how long the CPU was watched: from the first PUT to
	// the poll that saw every subtask started.
	window time.Duration
	cpu    map[string]float64
}

// placeShape submits the jobs (64 at a time) with sim subtasks that run for
// d, and waits until every subtask has started.
func placeShape(ctx context.Context, c *cluster.Cluster, poll *cluster.Node, clients []*client.Client, ids []string, width int, d time.Duration, l cluster.Leader, fleetPids []int) (placeResult, error) {
	spec := []byte(fmt.Sprintf(`{"name":"place","vertices":[{"id":"v","parallelism":%d,"command":["sim"],"env":{"SIM_DURATION":%q}}]}`, width, d.String()))
	var res placeResult
	watch := masterWatch(c, l, fleetPids)
	t0 := time.Now()
	if err := forEach(ctx, ids, 64, func(i int, id string) error {
		_, err := clients[i%len(clients)].SubmitJob(ctx, id, spec)
		return err
	}); err != nil {
		return res, err
	}
	res.submitted = time.Since(t0)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last progress
	want, polls := len(ids)*width, 0
	err := waitUntil(wctx, "every subtask started", 50*time.Millisecond, func() (bool, error) {
		// The poll reads the follower's RUNNING count, and its whole state
		// only once the count is reached (or every tenth poll: subtasks
		// that finish before the last one starts keep the count below),
		// so that the measurement does not take the masters' CPU.
		if polls++; polls%10 != 0 {
			if n, err := runningExecutions(wctx, poll); err != nil || n < want {
				return false, err
			}
		}
		st, at, err := snapshot(wctx, poll)
		if err != nil {
			return false, err
		}
		last = countJobs(st, ids)
		if last.total == want && last.running+last.finished == last.total {
			res.observed = at.Sub(t0)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return res, fmt.Errorf("%w (placed %d, running %d of %d; the leader's executors: %s)", err, last.placed, last.running, len(ids)*width, liveness(ctx, l))
	}
	res.cpu = watch.stop()
	res.window = time.Since(t0)
	res.placed = time.UnixMilli(last.lastDeploy).Sub(t0)
	res.running = time.UnixMilli(last.lastStart).Sub(t0)
	if last.unstarted > 0 || res.running <= 0 {
		res.running = res.observed // some start went unrecorded: the poll is all there is
	}
	return res, nil
}

// executorStatuses counts the executors the leader knows by status
// (alive, suspect, lost, ...).
func executorStatuses(ctx context.Context, l cluster.Leader) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var v api.Cluster
	if err := cluster.GetJSON(ctx, transport.URL(cluster.HTTP, l.Node.HTTPAddr, "/v1/cluster"), &v); err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, x := range v.Executors {
		count[x.Status]++
	}
	return count, nil
}

// liveness says how many executors the leader counts in each status, for
// an error that needs explaining: work waits while executors are not alive.
func liveness(ctx context.Context, l cluster.Leader) string {
	count, err := executorStatuses(ctx, l)
	if err != nil {
		return "unknown: " + err.Error()
	}
	keys := slices.Sorted(maps.Keys(count))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", count[k], k)
	}
	return strings.Join(parts, ", ")
}

// waitEnded waits until every execution of the jobs has ended, so their
// slots are free again.
func waitEnded(ctx context.Context, poll *cluster.Node, ids []string, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return waitUntil(wctx, "the jobs' executions to end", 200*time.Millisecond, func() (bool, error) {
		st, _, err := snapshot(wctx, poll)
		if err != nil {
			return false, err
		}
		p := countJobs(st, ids)
		return p.total > 0 && p.terminal == p.total, nil
	})
}

func jobIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return ids
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// forEach calls f for every id, conc at a time, and returns the first error;
// after an error no further id is started.
func forEach(ctx context.Context, ids []string, conc int, f func(i int, id string) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i, ids[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return first != nil
	}
	for i := range ids {
		if ctx.Err() != nil || failed() {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// cpuSeconds is the CPU that every process in a cpuWatch reading used
// over window: the masters, the fleet and the load generator.
func cpuSeconds(cpu map[string]float64, window time.Duration) float64 {
	cores := 0.0
	for k, v := range cpu {
		if strings.HasSuffix(k, "_cpu_cores") && !strings.HasSuffix(k, "_children_cpu_cores") {
			cores += v
		}
	}
	return cores * window.Seconds()
}
