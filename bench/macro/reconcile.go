package macro

import (
	"context"
	"fmt"
	"time"

	"jobmaster/api"
	"jobmaster/bench/cluster"
	"jobmaster/bench/fleet"
	"jobmaster/bench/results"
	"jobmaster/client"
	"jobmaster/transport"
	"jobmaster/wire"
)

// Reconciliation measures how fast the leader acts on an executor's report.
// The executor is a scripted one (fleet.Scripted): it joins gossip and
// speaks the wire protocol like a real executor, but the benchmark decides
// what its reports say and it timestamps what the leader sends it. All the
// times are taken in this process, on one clock.
//
//   - unknown, pushed: the executor pushes a partial report (as a real one
//     does when an execution changes) showing an execution the leader
//     never placed. From sending the push to the leader's cancel of it
//     arriving at the executor.
//   - unknown, in a heartbeat answer: the same execution appears in a
//     heartbeat's full report. From writing that answer to the cancel
//     arriving.
//   - missing: a job's only subtask is placed on the executor, deployed
//     and recorded RUNNING; then a heartbeat answer leaves it out (it is
//     gone from the executor). From writing that answer to the leader's
//     state showing the execution FAILED (the leader's GET /v1/jobs/{id},
//     polled every 2 ms). The same answer also carries the unknown
//     execution of the previous case.
//
// The scripted answer is the second heartbeat after the deployment is
// recorded, so the heartbeat was sent after the acknowledgment committed
// (the reconciler rightly ignores an execution acknowledged after its
// heartbeat was sent). Masters run with the default 1 s executor heartbeat.
func Reconciliation(ctx context.Context, e *Env) error {
	trials := 20
	if e.Quick {
		trials = 4
	}
	c, err := e.StartCluster(ctx, "reconcile")
	if err != nil {
		return err
	}
	defer c.Close()
	sx, err := fleet.StartScripted("rx1", 8, c.GossipAddrs())
	if err != nil {
		return err
	}
	defer sx.Close()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitExecutors(wctx, 1); err != nil {
		return err
	}
	if err := sx.WaitHeartbeats(wctx, 2); err != nil {
		return err
	}
	l, err := c.WaitLeader(wctx)
	if err != nil {
		return err
	}
	clients, tr, err := Clients(c, 2)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()

	var pushed, unknown, missing []time.Duration
	for k := 0; k < trials; k++ {
		ghost := wire.ExecutionStatus{ExecutionID: fmt.Sprintf("ghost-push/v/%d/0", k), JobID: "ghost-push", Vertex: "v", Subtask: k, State: wire.StateRunning}
		tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
		sent, err := sx.Push(tctx, ghost)
		if err != nil {
			tcancel()
			return fmt.Errorf("push trial %d: %w", k, err)
		}
		got, err := sx.WaitCancel(tctx, ghost.ExecutionID)
		tcancel()
		if err != nil {
			return fmt.Errorf("push trial %d: %w", k, err)
		}
		pushed = append(pushed, got.Sub(sent))
	}
	e.Log("reconcile: %d pushed unknown executions cancelled", trials)

	spec := []byte(`{"name":"recon","vertices":[{"id":"v","parallelism":1,"command":["sim"]}],"restart":{"strategy":"none"}}`)
	for k := 0; k < trials; k++ {
		tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
		u, m, err := heartbeatTrial(tctx, sx, clients[0], l.Node, k, spec)
		tcancel()
		if err != nil {
			return fmt.Errorf("heartbeat trial %d: %w", k, err)
		}
		unknown = append(unknown, u)
		missing = append(missing, m)
		e.Log("reconcile trial %d: unknown cancelled %.1f ms, missing failed %.1f ms after the report", k+1, ms(u), ms(m))
	}
	for _, f := range []struct {
		name string
		d    []time.Duration
		note string
	}{
		{"unknown execution, pushed: push to cancel", pushed, "partial report (push) to the cancel arriving at the executor"},
		{"unknown execution, in a heartbeat report: report to cancel", unknown, "heartbeat answer written to the cancel arriving at the executor"},
		{"missing execution: report to FAILED", missing, "heartbeat answer written to FAILED visible on the leader (2 ms polls)"},
	} {
		s := results.Seconds(f.d)
		e.Run.Add(results.Figure{Group: "reconciliation", Name: f.name + " (p50)", Value: results.Percentile(s, 50) * 1000, Unit: "ms",
			Extra:   map[string]float64{"p99_ms": results.Percentile(s, 99) * 1000, "min_ms": results.Percentile(s, 0) * 1000, "trials": float64(len(s))},
			Command: Command("reconcile"), Note: f.note})
	}
	return nil
}

// heartbeatTrial runs one heartbeat trial (see Reconciliation) and returns
// the report-to-cancel and report-to-FAILED times.
func heartbeatTrial(ctx context.Context, sx *fleet.Scripted, cl *client.Client, leader *cluster.Node, k int, spec []byte) (time.Duration, time.Duration, error) {
	id := fmt.Sprintf("recon-%d", k)
	exec := id + "/v/0/0"
	if _, err := cl.SubmitJob(ctx, id, spec); err != nil {
		return 0, 0, err
	}
	if _, err := sx.WaitDeploy(ctx, exec); err != nil {
		return 0, 0, err
	}
	if err := waitUntil(ctx, exec+" RUNNING", 5*time.Millisecond, func() (bool, error) {
		st, err := subtaskState(ctx, leader, id)
		return st == "RUNNING", err
	}); err != nil {
		return 0, 0, err
	}
	ghost := wire.ExecutionStatus{ExecutionID: fmt.Sprintf("ghost-hb/v/%d/0", k), JobID: "ghost-hb", Vertex: "v", Subtask: k, State: wire.StateRunning}
	var report time.Time
	select {
	case report = <-sx.Arm(1, exec, &ghost):
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	var failed time.Time
	if err := waitUntil(ctx, exec+" FAILED", 2*time.Millisecond, func() (bool, error) {
		st, err := subtaskState(ctx, leader, id)
		if st == "FAILED" {
			failed = time.Now()
			return true, nil
		}
		return false, err
	}); err != nil {
		return 0, 0, err
	}
	cancelled, err := sx.WaitCancel(ctx, ghost.ExecutionID)
	if err != nil {
		return 0, 0, err
	}
	return cancelled.Sub(report), failed.Sub(report), nil
}

// subtaskState reads the state of subtask 0 of a job from the leader.
func subtaskState(ctx context.Context, leader *cluster.Node, id string) (string, error) {
	var j api.Job
	if err := cluster.GetJSON(ctx, transport.URL(cluster.HTTP, leader.HTTPAddr, "/v1/jobs/"+id), &j); err != nil {
		return "", err
	}
	if len(j.Vertices) == 0 || len(j.Vertices[0].Subtasks) == 0 {
		return "", nil
	}
	return string(j.Vertices[0].Subtasks[0].State), nil
}
