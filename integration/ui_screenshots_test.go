package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// screenshotsEnv names the directory TestUIScreenshots writes its PNGs to
// (make screenshots sets it to docs/); unset, the test is skipped.
const screenshotsEnv = "JOBMASTER_SCREENSHOTS"

// screenshotJob is a graph with every kind of edge, whose parse subtask 1
// fails once (so that the page has a restart to show), and whose count
// runs long enough to be caught running.
const screenshotJob = `{"name": "wordcount", "vertices": [
	{"id": "ingest", "parallelism": 4, "command": ["sh", "-c", "sleep 3"]},
	{"id": "parse", "parallelism": 4, "command": ["sh", "-c",
	  "if [ $JOBMASTER_SUBTASK = 1 ] && [ $JOBMASTER_ATTEMPT = 0 ]; then sleep 1; echo 'bad record at line 1207' >&2; exit 3; fi; sleep 4"],
	 "inputs": [{"from": "ingest", "mode": "pipelined", "distribution": "forward"}]},
	{"id": "audit", "parallelism": 1, "command": ["sh", "-c", "sleep 5"],
	 "inputs": [{"from": "ingest", "mode": "blocking"}]},
	{"id": "count", "parallelism": 2, "command": ["sh", "-c", "sleep 120"],
	 "inputs": [{"from": "parse", "mode": "blocking"}]},
	{"id": "report", "parallelism": 1, "command": ["sh", "-c", "sleep 1"],
	 "inputs": [{"from": "count", "mode": "blocking"}, {"from": "audit", "mode": "blocking"}]}],
  "restart": {"strategy": "fixed-delay", "attempts": 3, "delay": "1s"}}`

// TestUIScreenshots writes docs/ui-*.png: the pages of a cluster at work,
// as `make screenshots` asks.
func TestUIScreenshots(t *testing.T) {
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		t.Skipf("set %s to a directory to write the UI's screenshots (make screenshots)", screenshotsEnv)
	}
	ctx := newBrowser(t, 1280, 820)
	c := NewCluster(t, Options{ACL: true, Executors: 3})
	leader := c.Leader()
	c.Submit("hello-1", `{"name": "hello", "vertices": [{"id": "greet", "parallelism": 2, "command": ["true"]}]}`)
	c.Submit("nightly-etl", `{"name": "nightly-etl", "vertices": [{"id": "load", "parallelism": 1, "command": ["sh", "-c", "exit 2"]}],
		"restart": {"strategy": "none"}}`)
	c.Submit("backfill", `{"name": "backfill", "vertices": [{"id": "scan", "parallelism": 2, "command": ["sh", "-c", "sleep 300"]}]}`)
	c.WaitJob("hello-1", time.Minute, "FINISHED")
	c.WaitJob("nightly-etl", time.Minute, "FAILED")
	c.Submit("wordcount-7f3a", screenshotJob)
	uiSignIn(t, c, ctx, leader.HTTPAddr, c.ManagementToken)

	shoot := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		var png []byte
		actions = append(actions, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var err error
			png, err = chromedp.FullScreenshot(100)(ctx, tg)
			return err
		}))
		browse(t, ctx, "the screenshot "+name, 2*time.Minute, actions...)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ui-"+name+".png"), png, 0o644))
		t.Logf("wrote %s", filepath.Join(dir, "ui-"+name+".png"))
	}
	shoot("job",
		chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs/wordcount-7f3a")),
		js(`document.querySelectorAll('#subtasks tr[data-vertex="count"][data-state="RUNNING"]').length === 2`),
		js(`document.querySelector('#dag g.vertex[data-vertex="audit"]').dataset.state === 'FINISHED'`),
		js(`document.querySelectorAll('#history li[data-type="job-restart"]').length > 0`),
		chromedp.Sleep(300*time.Millisecond), // the last repaint
	)
	// The stderr of parse[1]'s failed first attempt.
	shoot("log",
		chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs/wordcount-7f3a")),
		chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="parse"][data-subtask="1"] .log-previous`)),
		chromedp.Click(chromedp.CSS(`#subtasks tr[data-vertex="parse"][data-subtask="1"] .log-previous`)),
		chromedp.WaitVisible(chromedp.CSS(`#log .seg[data-stream="stderr"]`)),
		chromedp.Click(chromedp.CSS(`#log .seg[data-stream="stderr"]`)),
		js(`document.querySelector('#log').dataset.state === 'shown' && document.querySelector('#log-text').textContent.includes('bad record')`),
		chromedp.Sleep(300*time.Millisecond),
	)
	require.NoError(t, c.Client.CancelJob(c.ctx(), "backfill"))
	shoot("jobs",
		chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs")),
		js(`document.querySelector('#jobs tr[data-job="backfill"] .pill')?.textContent === 'CANCELED'`),
		chromedp.Sleep(300*time.Millisecond),
	)
	shoot("executors",
		chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/executors")),
		js(`document.querySelectorAll('#executors-body tr').length === 3`),
		chromedp.Sleep(300*time.Millisecond),
	)
	// The masters page of a follower, across a failover.
	var follower *Node
	for _, m := range c.Masters {
		if m != leader {
			follower = m
			break
		}
	}
	uiSignIn(t, c, ctx, follower.HTTPAddr, c.ManagementToken)
	browse(t, ctx, "the masters page", uiWait,
		chromedp.Navigate(c.URL(follower.HTTPAddr, "/ui/#/masters")),
		js(`document.querySelector('#leader-id')?.textContent === `+q(leader.ID)))
	leader.Kill()
	next := c.Leader()
	leader.Start()
	shoot("masters",
		js(`document.querySelector('#leader-id')?.textContent === `+q(next.ID)),
		js(`[...document.querySelectorAll('#masters-body tr')].every(tr => /^\d+$/.test(tr.lastChild.textContent))`),
	)
}
