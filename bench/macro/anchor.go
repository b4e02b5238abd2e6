package macro

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"jobmaster/bench/etcd"
	"jobmaster/bench/results"
	"jobmaster/transport"
)

// The anchor: etcd beside jobmaster, in the same run, on the same machine,
// with the same closed-loop client, the same concurrency, the same spread
// over three nodes and the same failover trial, so that a figure reads as
// a ratio that holds when the machine's speed does not. It runs when an
// etcd binary is on PATH (`make bench-anchors`); without one the figures
// say so and no ratio is given.

// loopResult is what a closed loop measured.
type loopResult struct {
	lat     []time.Duration
	errs    int
	lastErr error
}

// closedLoop runs conc workers, each sending one request after another
// (do(ctx, worker, seq)) until the window ends; a request counts when its
// answer arrived inside the window (after warm), with its latency.
func closedLoop(ctx context.Context, conc int, warm, window time.Duration, do func(ctx context.Context, worker, seq int) error,
	during func(from, to time.Time)) loopResult {
	start := time.Now()
	from, to := start.Add(warm), start.Add(warm+window)
	ws := make([]loopResult, conc)
	var wg sync.WaitGroup
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &ws[i]
			for seq := 0; ; seq++ {
				t0 := time.Now()
				if t0.After(to) || ctx.Err() != nil {
					return
				}
				err := do(ctx, i, seq)
				t1 := time.Now()
				if t1.Before(from) || t1.After(to) {
					continue
				}
				if err != nil {
					w.errs++
					w.lastErr = err
					continue
				}
				w.lat = append(w.lat, t1.Sub(t0))
			}
		}()
	}
	if during != nil {
		during(from, to)
	}
	wg.Wait()
	var out loopResult
	for _, w := range ws {
		out.lat = append(out.lat, w.lat...)
		out.errs += w.errs
		if w.lastErr != nil {
			out.lastErr = w.lastErr
		}
	}
	return out
}

// rate and percentiles of a loop.
func (r loopResult) figures(window time.Duration) (rate, p50ms, p99ms float64) {
	secs := results.Seconds(r.lat)
	return float64(len(r.lat)) / window.Seconds(), results.Percentile(secs, 50) * 1000, results.Percentile(secs, 99) * 1000
}

// startEtcd starts a fresh etcd cluster for one benchmark, or says why it
// cannot.
func (e *Env) startEtcd(ctx context.Context, name string) (*etcd.Cluster, error) {
	bin, err := etcd.Binary()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.clusters++
	dir := filepath.Join(e.Dir, fmt.Sprintf("%02d-%s-etcd", e.clusters, name))
	e.mu.Unlock()
	start := time.Now()
	c, err := etcd.Start(ctx, bin, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: start etcd: %w", name, err)
	}
	e.Log("%s: 3 etcd members (%s) up in %s (data and logs in %s)", name, etcd.Version(bin), time.Since(start).Round(time.Millisecond), dir)
	return c, nil
}

// etcdSubmissions measures etcd's puts at conc clients, spread over its
// three members as jobmaster's submissions are over the masters, and adds
// the figure and the ratio of jobmaster's (jm, measured in the same run)
// to it.
func etcdSubmissions(ctx context.Context, e *Env, conc int, follow bool, warm, window time.Duration, jm loopResult) error {
	name := fmt.Sprintf("submission-c%d", conc)
	how := "spread over 3 members"
	if follow {
		name += "-follow"
		how = "every client to the leader"
	}
	level := levelName(conc, follow)
	c, err := e.startEtcd(ctx, name)
	if err != nil {
		e.Run.Add(results.Figure{Group: e.group("anchor"), Name: "etcd puts, " + level, Unit: "puts/s",
			Command: e.command("submission"), Note: "not measured: " + err.Error()})
		return nil
	}
	defer c.Close()
	hc := transport.NewClient(transport.ClientOptions{MaxIdleConnsPerHost: conc + 8, IdleConnTimeout: time.Minute})
	defer hc.CloseIdleConnections()
	nodes := c.Nodes
	if follow {
		l, err := c.WaitLeader(ctx, hc)
		if err != nil {
			return err
		}
		nodes = []*etcd.Node{l}
	}
	value := []byte(submitSpec)
	var cpu map[string]float64
	res := closedLoop(ctx, conc, warm, window, func(ctx context.Context, i, seq int) error {
		return etcd.Put(ctx, hc, nodes[i%len(nodes)], fmt.Sprintf("sub-%d-%d-%d", conc, i, seq), value)
	}, func(from, to time.Time) {
		_ = sleep(ctx, time.Until(from))
		names, pids := []string{"bench"}, []int{os.Getpid()}
		for _, n := range c.Nodes {
			names, pids = append(names, "etcd"), append(pids, n.Pid())
		}
		watch := watchCPU(names, pids)
		_ = sleep(ctx, time.Until(to))
		cpu = watch.stop()
	})
	rate, p50, p99 := res.figures(window)
	jrate, _, jp99 := jm.figures(window)
	e.Run.Add(results.Figure{Group: e.group("anchor"), Name: "etcd puts, " + level, Value: rate, Unit: "puts/s",
		Extra: map[string]float64{"p50_ms": p50, "p99_ms": p99, "errors": float64(res.errs),
			"etcd_cpu_cores": cpu["etcd_cpu_cores"], "bench_cpu_cores": cpu["bench_cpu_cores"]},
		Command: e.command("submission"), Note: "this run; PUT /v3/kv/put through etcd's JSON gateway, the job spec as value, same client, " + how + "; etcd_cpu_cores is its three members'"})
	ratio := e.Run.Add(results.Figure{Group: e.group("anchor"), Name: "jobmaster jobs/s / etcd puts/s, " + level,
		Value: jrate / rate, Unit: "x", Extra: map[string]float64{"jobmaster": jrate, "etcd": rate}, Command: e.command("submission")})
	switch conc {
	case 64:
		ratio.AtLeast(1.5, ">= 1.5 x")
		e.Run.Add(results.Figure{Group: e.group("anchor"), Name: "jobmaster p99 / etcd p99, " + level, Value: jp99 / max(p99, 1e-9), Unit: "x",
			Extra: map[string]float64{"jobmaster_ms": jp99, "etcd_ms": p99}, Command: e.command("submission")}).AtMost(1, "<= 1 x")
	case 3:
		ratio.AtLeast(1.0, ">= 1.0 x")
	}
	e.Log("%s: etcd %.0f puts/s (p50 %.1f ms, p99 %.1f ms): ratio %.2f", name, rate, p50, p99, jrate/rate)
	return nil
}

// etcdFailover runs jobmaster's failover trial against etcd: kill -9 the
// leader, a writer per survivor puts until one is accepted, restart the
// killed member, wait for agreement, again. It returns the times from the
// signal to the first accepted write.
func etcdFailover(ctx context.Context, e *Env, trials int) ([]time.Duration, error) {
	c, err := e.startEtcd(ctx, "failover")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	hc := transport.NewClient(transport.ClientOptions{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute})
	defer hc.CloseIdleConnections()
	var toWrite []time.Duration
	value := []byte(submitSpec)
	for trial := 0; trial < trials; trial++ {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		l, err := c.WaitLeader(wctx, hc)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("etcd trial %d: %w", trial, err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
		survivors := c.Followers(l)
		for _, s := range survivors {
			_ = etcd.Put(ctx, hc, s, fmt.Sprintf("fo-warm-%d-%s", trial, s.Name), value)
		}
		tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
		start := make(chan struct{})
		wrote := make(chan time.Time, len(survivors))
		for i, s := range survivors {
			go func() {
				<-start
				for seq := 0; tctx.Err() == nil; seq++ {
					pctx, pcancel := context.WithTimeout(tctx, attemptTimeout)
					err := etcd.Put(pctx, hc, s, fmt.Sprintf("fo-%d-%d-%d", trial, i, seq), value)
					pcancel()
					if err == nil {
						wrote <- time.Now()
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
		}
		t0 := l.Kill(func() { close(start) })
		var tw time.Time
		select {
		case tw = <-wrote:
		case <-tctx.Done():
			tcancel()
			return nil, fmt.Errorf("etcd trial %d: no accepted write within 30s", trial)
		}
		tcancel()
		toWrite = append(toWrite, tw.Sub(t0))
		if err := c.Restart(l); err != nil {
			return nil, err
		}
		e.Log("etcd failover trial %d: killed %s: write accepted after %s", trial+1, l.Name, toWrite[trial].Round(time.Millisecond))
	}
	return toWrite, nil
}

// anchorFailover adds etcd's failover figures and the ratios of
// jobmaster's (ws, seconds to the first accepted write) to them.
func anchorFailover(ctx context.Context, e *Env, trials int, ws []float64) {
	et, err := etcdFailover(ctx, e, trials)
	if err != nil {
		e.Run.Add(results.Figure{Group: e.group("anchor"), Name: "etcd: kill -9 leader to first accepted write (p50)", Unit: "s",
			Command: e.command("failover"), Note: "not measured: " + err.Error()})
		return
	}
	es := results.Seconds(et)
	e50, e99 := results.Percentile(es, 50), results.Percentile(es, 99)
	e.Run.Add(results.Figure{Group: e.group("anchor"), Name: "etcd: kill -9 leader to first accepted write (p50)", Value: e50, Unit: "s",
		Extra:   map[string]float64{"p99_s": e99, "trials": float64(len(es))},
		Command: e.command("failover"), Note: "this run; etcd's default timings (100 ms heartbeat, 1 s election)"})
	j50, j99 := results.Percentile(ws, 50), results.Percentile(ws, 99)
	e.Run.Add(results.Figure{Group: e.group("anchor"), Name: "jobmaster failover / etcd failover (p50)", Value: j50 / e50, Unit: "x",
		Extra: map[string]float64{"jobmaster_s": j50, "etcd_s": e50, "jobmaster_p99_s": j99, "etcd_p99_s": e99}, Command: e.command("failover")})
}
