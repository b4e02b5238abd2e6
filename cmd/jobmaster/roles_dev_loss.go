package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"time"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/wire"
)

// lossDemo is what --partition-loss-demo did: the executor it killed and
// the subtasks of split whose partitions it held.
type lossDemo struct {
	victim *devNode
	lost   []int
	why    string // the job's message after the loss
}

// killPartitionHolder follows the job until split has FINISHED, then kills
// (kill -9) the executor holding most of split's partitions, and restarts it
// once the leader has declared it lost.
func (c *devCluster) killPartitionHolder(ctx context.Context, cl *client.Client, id string, newView func() progressView, start time.Time) (*lossDemo, error) {
	view := newView()
	var job *api.Job
	for {
		var err error
		if job, err = cl.Job(ctx, id); err != nil {
			view.close()
			return nil, err
		}
		view.show(job, time.Since(start))
		if splitFinished(job) || terminalStatus(job.Status) {
			break
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			view.close()
			return nil, err
		}
	}
	view.close()
	if terminalStatus(job.Status) {
		return nil, fmt.Errorf("the demo job ended %s before split finished", job.Status)
	}
	held := map[string][]int{}
	for _, v := range job.Vertices {
		if v.ID != "split" {
			continue
		}
		for _, s := range v.Subtasks {
			held[s.Executor] = append(held[s.Executor], s.Index)
		}
	}
	var victim *devNode
	for _, e := range c.execs {
		if victim == nil || len(held[e.id]) > len(held[victim.id]) {
			victim = e
		}
	}
	d := &lossDemo{victim: victim, lost: held[victim.id]}
	fmt.Fprintf(c.out, "\n>>> split finished; %s holds the partitions of split %s. Killing %s (kill -9, pid %d).\n",
		victim.id, subtaskList(d.lost), victim.id, victim.pid())
	victim.signal(syscall.SIGKILL, 5*time.Second)
	fmt.Fprintf(c.out, ">>> The leader declares %s lost once it has been silent for the executor timeout; then the\n", victim.id)
	fmt.Fprintln(c.out, ">>> lost subtasks of split run again elsewhere and count reads their new output.")
	for {
		view, err := cl.Cluster(ctx)
		if err == nil && executorLost(view, victim.id) {
			break
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
	if j, err := cl.Job(ctx, id); err == nil {
		d.why = j.Message
	}
	fmt.Fprintf(c.out, ">>> %s is lost (%.1fs after the submission): %s\n", victim.id, time.Since(start).Seconds(), d.why)
	fmt.Fprintf(c.out, ">>> Restarting %s: it comes back with nothing the job needs.\n\n", victim.id)
	if err := c.start(victim); err != nil {
		return nil, err
	}
	return d, nil
}

func splitFinished(job *api.Job) bool {
	for _, v := range job.Vertices {
		if v.ID != "split" {
			continue
		}
		for _, s := range v.Subtasks {
			if s.State != wire.StateFinished {
				return false
			}
		}
		return len(v.Subtasks) > 0
	}
	return false
}

func executorLost(view *api.Cluster, id string) bool {
	for _, e := range view.Executors {
		if e.ID == id {
			return e.Status == "lost"
		}
	}
	return false
}

func subtaskList(idx []int) string {
	sort.Ints(idx)
	parts := make([]string, len(idx))
	for i, n := range idx {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}

// summary says which subtasks ran again, and why.
func (d *lossDemo) summary(c *devCluster, job *api.Job) {
	var again []string
	for _, v := range job.Vertices {
		for _, s := range v.Subtasks {
			if s.Attempt > 0 {
				again = append(again, fmt.Sprintf("%s/%d (attempt %d)", v.ID, s.Index, s.Attempt))
			}
		}
	}
	fmt.Fprintf(c.out, "\nRan again after %s was lost: %s.\n", d.victim.id, strings.Join(again, ", "))
	if d.why != "" {
		fmt.Fprintf(c.out, "Why: %s\n", d.why)
	}
	fmt.Fprintln(c.out, "The counts are those of a run without the loss: the consumers read only the attempts the state names.")
}
