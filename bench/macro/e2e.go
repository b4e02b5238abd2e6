package macro

import (
	"context"
	"fmt"
	"maps"
	"os"
	"time"

	"jobmaster/api"
	"jobmaster/bench/cluster"
	"jobmaster/bench/fleet"
	"jobmaster/bench/results"
	"jobmaster/transport"
)

// EndToEnd runs one job of 1,000 `/bin/true` subtasks on two executor
// processes with the exec runtime (500 slots each: the job's one vertex is
// one pipelined region, placed all or nothing), and measures from sending
// the PUT to the job being FINISHED in a follower's state (polled every
// 20 ms). Each task is a real process under the executor's shim.
func EndToEnd(ctx context.Context, e *Env) error {
	const tasks, executors = 1000, 2
	c, err := e.StartCluster(ctx, "e2e")
	if err != nil {
		return err
	}
	defer c.Close()
	var exs []*cluster.Node
	for i := 0; i < executors; i++ {
		n, err := c.AddExecutor(fmt.Sprintf("x%d", i+1), tasks/executors, "exec")
		if err != nil {
			return err
		}
		exs = append(exs, n)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitExecutors(wctx, executors); err != nil {
		return err
	}
	l, err := c.WaitLeader(wctx)
	if err != nil {
		return err
	}
	// Every executor has answered the leader's heartbeats.
	var addrs []string
	for _, x := range exs {
		addrs = append(addrs, x.HTTPAddr)
	}
	if err := fleet.WaitHeard(wctx, addrs, l.Token); err != nil {
		return err
	}
	if err := sleep(ctx, 1500*time.Millisecond); err != nil { // the leader has processed their answers
		return err
	}
	clients, tr, err := Clients(c, 4)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	poll := c.Followers(l)[0]
	names := []string{"leader", "bench"}
	pids := []int{l.Node.Pid(), os.Getpid()}
	for _, x := range exs {
		names = append(names, x.ID)
		pids = append(pids, x.Pid())
	}
	watch := watchCPU(names, pids)

	id := "e2e-true-1000"
	spec := []byte(fmt.Sprintf(`{"name":"e2e","vertices":[{"id":"t","parallelism":%d,"command":["/bin/true"]}]}`, tasks))
	t0 := time.Now()
	if _, err := clients[0].SubmitJob(ctx, id, spec); err != nil {
		return err
	}
	var done time.Time
	var last progress
	var ended string // a terminal status other than FINISHED
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer rcancel()
	err = waitUntil(rctx, "the job to finish", 20*time.Millisecond, func() (bool, error) {
		var j api.Job
		if err := cluster.GetJSON(rctx, transport.URL(cluster.HTTP, poll.HTTPAddr, "/v1/jobs/"+id+"?stale"), &j); err != nil {
			return false, err
		}
		switch j.Status {
		case "FINISHED":
			done = time.Now()
			return true, nil
		case "FAILED", "CANCELED":
			ended = j.Status
			return true, nil
		}
		return false, nil
	})
	cpu := watch.stop()
	if err == nil && ended != "" {
		err = fmt.Errorf("e2e: job %s ended %s", id, ended)
	}
	if err != nil {
		return err
	}
	if st, _, err := snapshot(ctx, poll); err == nil {
		last = countJobs(st, []string{id})
	}
	total := done.Sub(t0)
	extra := map[string]float64{
		"placed_s":        time.UnixMilli(last.lastDeploy).Sub(t0).Seconds(),
		"last_task_end_s": time.UnixMilli(last.lastEnd).Sub(t0).Seconds(),
		"tasks_per_s":     tasks / total.Seconds(),
	}
	maps.Copy(extra, keep(cpu, "leader_cpu", "bench_cpu", "x1_", "x2_"))
	e.Run.Add(results.Figure{Group: "end to end", Name: "1 job of 1000 /bin/true on 2 exec executors", Value: total.Seconds(), Unit: "s",
		Extra: extra, Command: Command("e2e"), Note: "PUT to FINISHED; real processes under the shim"}).AtMost(10, "<= 10 s")
	e.Log("e2e: FINISHED in %s (placed at %.2fs, last task ended at %.2fs); executors used %.2f + %.2f cores",
		total.Round(time.Millisecond), extra["placed_s"], extra["last_task_end_s"], cpu["x1_cpu_cores"], cpu["x2_cpu_cores"])
	return nil
}
