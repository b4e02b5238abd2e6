package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/examples"
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// demo submits the word count and follows it to its end; with
// --failover-demo it kills the leader mid-job.
func (c *devCluster) demo(cmd *cobra.Command, env *cliEnv, cl *client.Client, leader string, o *devOpts) (bool, error) {
	ctx, out := cmd.Context(), c.out
	id, err := cl.CreateJob(ctx, examples.WordCount())
	if err != nil {
		return false, fmt.Errorf("submit the demo job: %w", err)
	}
	fmt.Fprintf(out, "\nSubmitted the demo job examples/wordcount.json as %s:\n", id)
	fmt.Fprintln(out, "  split (4 subtasks) --blocking--> count (2) --blocking--> report (1)")
	fmt.Fprintln(out, "  (the words travel between the executors as result partitions)")
	opts := &clientOpts{env: env}
	newView := func() progressView { return opts.newView(cmd) }
	start := time.Now()

	if o.failoverDemo {
		if err := c.failover(ctx, cl, id, newView, start); err != nil {
			return false, err
		}
	}
	var loss *lossDemo
	if o.lossDemo {
		if loss, err = c.killPartitionHolder(ctx, cl, id, newView, start); err != nil {
			return false, err
		}
	}
	view := newView()
	if o.failoverDemo || o.lossDemo { // the clock goes on from the submission
		view = sinceView{view, time.Since(start)}
	}
	spec, _ := jobspec.Parse(examples.WordCount())
	job, _, err := waitJob(ctx, cl, id, view, env.waitOpts(spec))
	view.close()
	if err != nil {
		return false, err
	}
	elapsed := time.Since(start)
	if job.Status != statusFinished {
		fmt.Fprintf(out, "\nThe demo job ended %s after %s: %s\n", job.Status, formatElapsed(elapsed), job.Message)
		return false, nil
	}
	if o.runtime == "sim" {
		fmt.Fprintf(out, "\nThe demo job FINISHED in %s (simulated tasks: no processes ran, so there is no report).\n", formatElapsed(elapsed))
	} else {
		fmt.Fprintf(out, "\nThe demo job FINISHED in %s. Its report (jobmaster job logs %s report 0):\n", formatElapsed(elapsed), id)
	}
	var report []string
	if rc, err := cl.Logs(ctx, id, "report", 0, client.Stdout); err == nil && o.runtime != "sim" {
		b, _ := io.ReadAll(rc)
		rc.Close()
		report = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		for _, l := range report {
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
	if loss != nil {
		loss.summary(c, job, report, spec)
	}
	if o.failoverDemo {
		restarted := job.Restarts
		for _, v := range job.Vertices {
			for _, s := range v.Subtasks {
				restarted += s.Attempt
			}
		}
		if restarted == 0 {
			fmt.Fprintln(out, "\nNo task was restarted by the failover: every subtask ran exactly once (attempt 0).")
		} else {
			fmt.Fprintf(out, "\nWARNING: %d restart(s) happened; see 'jobmaster job status %s'.\n", restarted, id)
		}
	}
	return true, nil
}

// failover follows the job until its first stage runs, kills the leader,
// and reports the takeover.
func (c *devCluster) failover(ctx context.Context, cl *client.Client, id string, newView func() progressView, start time.Time) error {
	view := newView()
	for {
		job, err := cl.Job(ctx, id)
		if err != nil {
			view.close()
			return err
		}
		view.show(job, time.Since(start))
		if running(job) >= 4 || terminalStatus(job.Status) {
			break
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			view.close()
			return err
		}
	}
	view.close()
	before, err := cl.Cluster(ctx)
	if err != nil || before.Leader == nil {
		return fmt.Errorf("no leader to kill: %v", err)
	}
	victim := c.master(*before.Leader)
	if victim == nil {
		return fmt.Errorf("leader %q is not one of this cluster's masters", *before.Leader)
	}
	fmt.Fprintf(c.out, "\n>>> Killing the leader %s (kill -9, pid %d) while the job runs.\n", victim.id, victim.pid())
	killed := time.Now()
	victim.signal(syscall.SIGKILL, 5*time.Second)
	for {
		after, err := cl.Cluster(ctx)
		if err == nil && after.Leader != nil && *after.Leader != victim.id && after.FencingToken > before.FencingToken {
			fmt.Fprintf(c.out, ">>> %s took over after %.2fs with fencing token %d (was %d).\n",
				*after.Leader, time.Since(killed).Seconds(), after.FencingToken, before.FencingToken)
			break
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	if err := c.start(victim); err != nil {
		return err
	}
	fmt.Fprintf(c.out, ">>> Restarted %s; it rejoins as a follower.\n\n", victim.id)
	return nil
}

func running(job *api.Job) int {
	n := 0
	for _, v := range job.Vertices {
		for _, s := range v.Subtasks {
			if s.State == wire.StateRunning {
				n++
			}
		}
	}
	return n
}
