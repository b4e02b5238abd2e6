package macro

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"jobmaster/bench/results"
)

// submitSpec is the job every submission benchmark sends: one subtask. No
// executor is running, so the jobs are accepted and wait for slots.
const submitSpec = `{"name":"bench","vertices":[{"id":"v","parallelism":1,"command":["/bin/true"]}]}`

// SubmissionLevels are the submission benchmark's concurrency levels: 3
// is one client per master; 64 and 3 carry the etcd ratios' targets.
var SubmissionLevels = []int{1, 3, 16, 64, 256}

// FollowLevels are the levels measured a second time with clients that
// follow the leader.
var FollowLevels = []int{3, 64}

// Submission measures jobs accepted per second: conc clients, each in a
// loop, PUT /v1/jobs/{unique id}. Spread: client i talks to master i mod 3
// only, so two thirds of the requests are relayed by a follower to the
// leader. Then, at FollowLevels, following: client i is the client package
// with all three addresses, starting at master i mod 3; each master's
// answer names the leader (api.LeaderHeader), and the client sends its
// next request there, as the CLI does. Each level gets a fresh cluster, a
// warm-up, then a measured window; a job counts when its 201 arrived inside
// the window, and its latency is from sending the PUT to that answer. etcd
// gets the same (anchor.go): spread, each client to member i mod 3; and
// following, each client to etcd's leader.
func Submission(ctx context.Context, e *Env) error {
	levels := e.Clients
	if len(levels) == 0 {
		levels = SubmissionLevels
	}
	warm, window := time.Second, 5*time.Second
	if e.Quick {
		warm, window = 500*time.Millisecond, 2*time.Second
	}
	for _, conc := range levels {
		if err := submitLevel(ctx, e, conc, false, warm, window); err != nil {
			return err
		}
	}
	for _, conc := range FollowLevels {
		if slices.Contains(levels, conc) {
			if err := submitLevel(ctx, e, conc, true, warm, window); err != nil {
				return err
			}
		}
	}
	return nil
}

func submitLevel(ctx context.Context, e *Env, conc int, follow bool, warm, window time.Duration) error {
	name := fmt.Sprintf("submission-c%d", conc)
	how := "spread over 3 masters"
	if follow {
		name += "-follow"
		how = "clients following the leader"
	}
	c, err := e.StartSecurable(ctx, name)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := c.WaitLeader(ctx)
	if err != nil {
		return err
	}
	newClients := Clients
	if follow {
		newClients = FollowingClients
	}
	clients, tr, err := newClients(c, conc)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	spec := []byte(submitSpec)
	var cpu map[string]float64
	res := closedLoop(ctx, conc, warm, window, func(ctx context.Context, i, seq int) error {
		_, err := clients[i%len(clients)].SubmitJob(ctx, fmt.Sprintf("sub-%d-%d-%d", conc, i, seq), spec)
		return err
	}, func(from, to time.Time) {
		_ = sleep(ctx, time.Until(from))
		watch := masterWatch(c, l, nil)
		_ = sleep(ctx, time.Until(to))
		cpu = watch.stop()
	})
	errs, lastErr := res.errs, res.lastErr
	rate, p50, p99 := res.figures(window)
	extra := map[string]float64{
		"p50_ms": p50,
		"p99_ms": p99,
		"jobs":   float64(len(res.lat)),
		"errors": float64(errs),
	}
	maps.Copy(extra, keep(cpu, "leader_cpu", "bench_cpu", "follower1_cpu", "follower2_cpu"))
	e.Run.Add(results.Figure{
		Group: e.group("submission"), Name: levelName(conc, follow), Value: rate, Unit: "jobs/s", Extra: extra,
		Command: e.command("submission"),
		Note:    fmt.Sprintf("PUT /v1/jobs/{id}, %s, %s window after %s warm-up, fresh cluster", how, window, warm),
	})
	e.Log("%s: %.0f jobs/s, p50 %.1f ms, p99 %.1f ms, %d errors", name, rate, extra["p50_ms"], extra["p99_ms"], errs)
	if lastErr != nil {
		e.Log("%s: last error: %v", name, lastErr)
	}
	c.Close()
	if e.TLS {
		return nil // the anchor is measured once, beside the plain run
	}
	return etcdSubmissions(ctx, e, conc, follow, warm, window, res)
}

// levelName names a level's figures.
func levelName(conc int, follow bool) string {
	if follow {
		return fmt.Sprintf("%d clients following the leader", conc)
	}
	return fmt.Sprintf("%d clients", conc)
}
