package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/jobspec"
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
	fmt.Fprintln(c.out, ">>> lost subtasks of split run again elsewhere for the counts that had not read them yet (or ran")
	fmt.Fprintf(c.out, ">>> on %s), and those read their new output.\n", victim.id)
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

// summary says which subtasks ran again, and why, and whether the report
// (its lines, none with the sim runtime) holds the counts of the demo's
// text, counted here.
func (d *lossDemo) summary(c *devCluster, job *api.Job, report []string, spec *jobspec.Spec) {
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
	if job.Restarts > 0 {
		fmt.Fprintf(c.out, "The job's restarts (%d) count regions run again: the lost producers' region and those of the consumers that had yet to read them, or ran on the lost executor.\n", job.Restarts)
	}
	want := topWords(spec, 10)
	switch got := slices.DeleteFunc(slices.Clone(report), func(l string) bool { return !strings.ContainsRune(l, ' ') || strings.HasSuffix(l, ":") }); {
	case len(report) == 0:
	case slices.Equal(got, want):
		fmt.Fprintln(c.out, "The counts are those of the text, counted here without the cluster: the consumers read only the attempts the state names, and nothing was lost or read twice.")
	default:
		fmt.Fprintf(c.out, "WARNING: the counts differ from those of the text, counted here without the cluster: %s\n", strings.Join(want, "; "))
	}
}

// topWords counts the words of the demo job's text as it does (split's
// and count's commands: letters only, lower case, three or more, each line
// of the text a record) and lists the n most frequent as its report does:
// "count word", most frequent first, ties by word.
func topWords(spec *jobspec.Spec, n int) []string {
	if spec == nil || len(spec.Vertices) == 0 {
		return nil
	}
	counts := map[string]int{}
	for _, w := range strings.FieldsFunc(strings.ToLower(spec.Vertices[0].Env["TEXT"]), func(r rune) bool { return r < 'a' || r > 'z' }) {
		if len(w) >= 3 {
			counts[w]++
		}
	}
	words := slices.Collect(maps.Keys(counts))
	slices.SortFunc(words, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var out []string
	for _, w := range words[:min(n, len(words))] {
		out = append(out, fmt.Sprintf("%d %s", counts[w], w))
	}
	return out
}
