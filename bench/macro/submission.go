package macro

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"jobmaster/bench/results"
)

// submitSpec is the job every submission benchmark sends: one subtask. No
// executor is running, so the jobs are accepted and wait for slots.
const submitSpec = `{"name":"bench","vertices":[{"id":"v","parallelism":1,"command":["/bin/true"]}]}`

// Submission measures jobs accepted per second: conc clients, each in a
// loop, PUT /v1/jobs/{unique id} (client i talks to master i mod 3, so two
// thirds of the requests are forwarded by a follower to the leader). Each
// level gets a fresh cluster, a warm-up, then a measured window; a job
// counts when its 201 arrived inside the window, and its latency is from
// sending the PUT to that answer.
func Submission(ctx context.Context, e *Env) error {
	levels := []int{1, 16, 64, 256}
	warm, window := time.Second, 5*time.Second
	if e.Quick {
		warm, window = 500*time.Millisecond, 2*time.Second
	}
	for _, conc := range levels {
		if err := submitLevel(ctx, e, conc, warm, window); err != nil {
			return err
		}
	}
	return nil
}

func submitLevel(ctx context.Context, e *Env, conc int, warm, window time.Duration) error {
	name := fmt.Sprintf("submission-c%d", conc)
	c, err := e.StartSecurable(ctx, name)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := c.WaitLeader(ctx)
	if err != nil {
		return err
	}
	clients, tr, err := Clients(c, conc)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	spec := []byte(submitSpec)

	start := time.Now()
	from, to := start.Add(warm), start.Add(warm+window)
	type worker struct {
		lat    []time.Duration
		errs   int
		lastEr error
	}
	ws := make([]worker, conc)
	var wg sync.WaitGroup
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &ws[i]
			cl := clients[i%len(clients)]
			for seq := 0; ; seq++ {
				t0 := time.Now()
				if t0.After(to) || ctx.Err() != nil {
					return
				}
				_, err := cl.SubmitJob(ctx, fmt.Sprintf("sub-%d-%d-%d", conc, i, seq), spec)
				t1 := time.Now()
				if t1.Before(from) || t1.After(to) {
					continue
				}
				if err != nil {
					w.errs++
					w.lastEr = err
					continue
				}
				w.lat = append(w.lat, t1.Sub(t0))
			}
		}()
	}
	_ = sleep(ctx, time.Until(from))
	watch := masterWatch(c, l, 0)
	_ = sleep(ctx, time.Until(to))
	cpu := watch.stop()
	wg.Wait()
	var lat []time.Duration
	errs := 0
	var lastErr error
	for _, w := range ws {
		lat = append(lat, w.lat...)
		errs += w.errs
		if w.lastEr != nil {
			lastErr = w.lastEr
		}
	}
	secs := results.Seconds(lat)
	rate := float64(len(lat)) / window.Seconds()
	extra := map[string]float64{
		"p50_ms": results.Percentile(secs, 50) * 1000,
		"p99_ms": results.Percentile(secs, 99) * 1000,
		"jobs":   float64(len(lat)),
		"errors": float64(errs),
	}
	maps.Copy(extra, keep(cpu, "leader_cpu", "bench_cpu", "follower1_cpu", "follower2_cpu"))
	f := e.Run.Add(results.Figure{
		Group: e.group("submission"), Name: fmt.Sprintf("%d clients", conc), Value: rate, Unit: "jobs/s", Extra: extra,
		Command: e.command("submission"),
		Note:    fmt.Sprintf("PUT /v1/jobs/{id} spread over 3 masters, %s window after %s warm-up, fresh cluster", window, warm),
	})
	if conc == 64 {
		f.AtLeast(5000, ">= 5000 jobs/s")
	}
	e.Log("%s: %.0f jobs/s, p50 %.1f ms, p99 %.1f ms, %d errors", name, rate, extra["p50_ms"], extra["p99_ms"], errs)
	if lastErr != nil {
		e.Log("%s: last error: %v", name, lastErr)
	}
	return nil
}
