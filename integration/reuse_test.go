package integration

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"jobmaster/fsm"
)

// TestJobIDUsedAgainRunsCleanly: with a retention of two seconds, a job id
// is forgotten, its tombstone pruned, and the id submitted again, three
// times. Each run really runs (its own log, not the last run's, and not an
// executor's memory of the last run answering for it), under execution ids
// no earlier run had.
func TestJobIDUsedAgainRunsCleanly(t *testing.T) {
	c := NewCluster(t, Options{Executors: 1, JobRetention: 2 * time.Second})
	seen := map[string]int{}
	for run := 1; run <= 3; run++ {
		spec := jobSpec(t, "reuse", noRestart, vertex{ID: "v", Parallelism: 2, Env: map[string]string{"RUN": fmt.Sprint(run)},
			Command: []string{"sh", "-c", `echo run $RUN attempt $JOBMASTER_ATTEMPT`}})
		var page context.Context
		if run == 2 {
			// The browser starts before the job does: the job is
			// forgotten 2 s after it ends, and a browser started after
			// that on a busy machine found no job to show.
			page = newBrowser(t, 1280, 900)
		}
		c.Submit("reuse", spec)
		if run == 2 {
			historyIsThisRunsOnly(t, c, page, "reuse")
		}
		j := c.WaitJob("reuse", 30*time.Second, "FINISHED", "FAILED")
		require.Equal(t, "FINISHED", j.Status, "run %d: %s", run, j.Message)
		for k, s := range subtasks(j) {
			prev, dup := seen[s.ExecutionID]
			require.False(t, dup, "run %d: %s runs as %s, as run %d did", run, k, s.ExecutionID, prev)
			seen[s.ExecutionID] = run
			require.Equal(t, fmt.Sprintf("run %d attempt %d", run, s.Attempt), c.stdout(t, "reuse", "v", s.Index),
				"run %d: %s's log is its own", run, k)
		}
		c.waitIDFree(t, "reuse")
	}
	require.Len(t, seen, 6)
}

// historyIsThisRunsOnly opens the web UI's page of job id, whose id was
// used before: its history shows this job's status changes, not those of
// the earlier job of that id (the event stream has both, the forgetting
// between them).
func historyIsThisRunsOnly(t *testing.T, c *Cluster, ctx context.Context, id string) {
	var finished int
	browse(t, ctx, "the job page's history", uiWait,
		chromedp.Navigate(c.URL(c.Leader().HTTPAddr, "/ui/#/jobs/"+id)),
		js(`document.querySelector('#job-status')?.textContent === 'FINISHED'`),
		js(`[...document.querySelectorAll('#history li[data-type="job-status"]')].some(li => li.textContent.includes('\u2192 FINISHED'))`),
		eval(`[...document.querySelectorAll('#history li[data-type="job-status"]')].filter(li => li.textContent.includes('\u2192 FINISHED')).length`, &finished))
	require.Equal(t, 1, finished, "the history shows the FINISHED of an earlier job of this id")
}

// waitIDFree waits until the leader has forgotten the job and pruned its
// tombstone: nothing in the replicated state remembers the id.
func (c *Cluster) waitIDFree(t *testing.T, id string) {
	t.Helper()
	WaitFor(t, id+" to be forgotten and its tombstone pruned", 30*time.Second, func() bool {
		data, err := c.Client.SnapshotSave(c.ctx())
		if err != nil {
			return false
		}
		st, err := fsm.Restore(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("restore the leader's snapshot: %v", err)
		}
		_, tomb := st.Tombstone(id)
		return !st.HasJob(id) && !tomb
	})
}
