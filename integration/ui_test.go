package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// uiWait bounds each step a test waits for in the browser.
const uiWait = 40 * time.Second

// q quotes s as a JavaScript string.
func q(s string) string { return fmt.Sprintf("%q", s) }

// runSleeper submits job name, one task that sleeps five minutes, waits
// until it runs and returns its executor.
func (c *Cluster) runSleeper(t *testing.T, name string) string {
	t.Helper()
	c.Submit(name, `{"name": "`+name+`", "vertices": [{"id": "v", "parallelism": 1, "command": ["sleep", "300"]}]}`)
	var ex string
	WaitFor(t, name+" to run", 30*time.Second, func() bool {
		s := c.Job(name).Vertices[0].Subtasks[0]
		ex = s.Executor
		return s.State == wire.StateRunning
	})
	return ex
}

// countOf is how many elements match the CSS selector in the page.
func countOf(t *testing.T, ctx context.Context, selector string) int {
	t.Helper()
	var n int
	browse(t, ctx, "count "+selector, uiWait, eval(`document.querySelectorAll(`+q(selector)+`).length`, &n))
	return n
}

// uiSignIn opens the UI of the master at addr and signs in with the
// secret, as a user of a cluster with ACLs does.
func uiSignIn(t *testing.T, c *Cluster, ctx context.Context, addr, secret string) {
	t.Helper()
	browse(t, ctx, "the sign-in form", uiWait,
		chromedp.Navigate(c.URL(addr, "/")),
		chromedp.WaitVisible(chromedp.CSS("#login #token")),
		chromedp.SendKeys(chromedp.CSS("#token"), secret),
		chromedp.Click(chromedp.CSS("#login button")),
		chromedp.WaitVisible(chromedp.CSS("#jobs")),
		js(`document.querySelector('#conn').dataset.state === 'live'`),
	)
}

// TestUI drives the web UI in a headless Chromium against a real cluster
// with TLS and ACLs on, as `jobmaster dev` runs (the browser is told to
// accept the test CA's certificates): a job submitted through the API shows in the list, its
// page shows the graph's vertices and edges and a subtask reaching
// FINISHED as it happens, the cancel button cancels a job, and the
// masters page, served by the leader, recovers when the leader is killed
// and shows the new one, read from the other masters.
func TestUI(t *testing.T) {
	skipShort(t)
	ctx := newBrowser(t, 1280, 900)
	// An executor is lost only after 30 s: a paused one shows as not heard
	// from for long enough for the page to say so.
	c := NewCluster(t, Options{ACL: true, TLS: true, Lease: 10 * time.Second, Timeout: 30 * time.Second})
	leader := c.Leader()
	// A token the cluster does not know is refused, and said to be.
	browse(t, ctx, "an unknown token refused", uiWait,
		chromedp.Navigate(c.URL(leader.HTTPAddr, "/")),
		chromedp.WaitVisible(chromedp.CSS("#login #token")),
		chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"),
		chromedp.Click(chromedp.CSS("#login button")),
		js(`document.querySelector('#login .warn')?.textContent.includes('That token was refused')`),
	)
	uiSignIn(t, c, ctx, leader.HTTPAddr, c.ManagementToken)

	// The sign-in is kept for this tab only.
	var stored string
	browse(t, ctx, "the token in sessionStorage", uiWait,
		eval(`sessionStorage.getItem('jobmaster-token') + '|' + localStorage.length`, &stored))
	require.Equal(t, c.ManagementToken+"|0", stored)

	c.Submit("ui-dag", `{"name": "ui-dag", "vertices": [
		{"id": "split", "parallelism": 2, "command": ["sh", "-c", "sleep 1"]},
		{"id": "count", "parallelism": 1, "command": ["sh", "-c", "sleep 1"],
		 "inputs": [{"from": "split", "mode": "blocking"}]}]}`)
	t.Run("the list shows a submitted job", func(t *testing.T) {
		browse(t, ctx, "ui-dag in the list", uiWait,
			chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-job="ui-dag"]`)))
	})
	t.Run("a long id and name wrap instead of pushing the columns off the page", func(t *testing.T) {
		long := strings.Repeat("j", 128)
		c.Submit(long, `{"name": "`+strings.Repeat("W", 250)+`", "vertices": [{"id": "v", "parallelism": 1, "command": ["true"]}]}`)
		var fits bool
		browse(t, ctx, "the long job in the list", uiWait,
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs")),
			chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-job="`+long+`"]`)),
			eval(`document.querySelector('#jobs').getBoundingClientRect().right <= document.documentElement.clientWidth`, &fits))
		require.True(t, fits, "the jobs table is wider than the window")
		browse(t, ctx, "the long job's page", uiWait,
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs/"+long)),
			js(`document.querySelector('#job-status')?.textContent === 'FINISHED'`),
			eval(`document.documentElement.scrollWidth <= document.documentElement.clientWidth`, &fits))
		require.True(t, fits, "the job's page is wider than the window")
	})
	t.Run("a malformed address is no page", func(t *testing.T) {
		browse(t, ctx, "a malformed escape in the address", uiWait,
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs/%E0%A4%A")),
			js(`document.querySelector('main')?.textContent.includes('No such page')`),
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs")),
			chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-job="ui-dag"]`)))
	})
	t.Run("the job page shows the graph and a subtask finishing", func(t *testing.T) {
		var vertices, edge string
		browse(t, ctx, "the graph of ui-dag", uiWait,
			chromedp.Click(chromedp.CSS(`#jobs tr[data-job="ui-dag"] a`)),
			chromedp.WaitVisible(chromedp.CSS(`#dag g.vertex[data-vertex="count"]`)),
			eval(`[...document.querySelectorAll('#dag g.vertex')].map(g => g.dataset.vertex).sort().join(',')`, &vertices),
			eval(`document.querySelector('#dag .edge-label[data-from="split"][data-to="count"]').textContent`, &edge),
		)
		require.Equal(t, "count,split", vertices)
		require.Equal(t, "blocking · all-to-all", edge)
		browse(t, ctx, "a subtask of split FINISHED", uiWait,
			chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="split"][data-state="FINISHED"]`)),
			js(`document.querySelector('#dag g.vertex[data-vertex="split"]').dataset.state === 'FINISHED'`),
			js(`document.querySelector('#job-status').textContent === 'FINISHED'`),
		)
	})
	t.Run("the cancel button cancels a job", func(t *testing.T) {
		c.Submit("ui-cancel", `{"name": "ui-cancel", "vertices": [
			{"id": "wait", "parallelism": 1, "command": ["sh", "-c", "sleep 600"]}]}`)
		browse(t, ctx, "ui-cancel cancelled from its page", uiWait,
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs/ui-cancel")),
			js(`document.querySelector('#job-status')?.textContent === 'RUNNING'`),
			chromedp.Click(chromedp.CSS("#cancel")),
			js(`document.querySelector('#cancel').textContent === 'Confirm cancel'`),
			chromedp.Click(chromedp.CSS("#cancel")),
			js(`document.querySelector('#job-status').textContent === 'CANCELED'`),
			js(`document.querySelector('#cancel').disabled`),
		)
		require.Equal(t, "CANCELED", c.Job("ui-cancel").Status)
	})
	t.Run("a subtask cancelled after a restart says why it ended and how the attempt before did", func(t *testing.T) {
		c.Submit("ui-both", `{"name": "ui-both", "vertices": [
			{"id": "w", "parallelism": 1, "command": ["sh", "-c", "[ \"$JOBMASTER_ATTEMPT\" -ge 1 ] || exit 3; sleep 600"]}],
			"restart": {"strategy": "fixed-delay", "delay": "100ms", "attempts": 2}}`)
		var why string
		browse(t, ctx, "ui-both cancelled at its second attempt", uiWait,
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs/ui-both")),
			chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="w"][data-state="RUNNING"][data-execution="ui-both/w/0/1"]`)),
			chromedp.Click(chromedp.CSS("#cancel")),
			js(`document.querySelector('#cancel').textContent === 'Confirm cancel'`),
			chromedp.Click(chromedp.CSS("#cancel")),
			chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="w"][data-state="CANCELED"]`)),
			eval(`document.querySelector('#subtasks tr[data-vertex="w"] td.why').textContent`, &why))
		require.Contains(t, why, "canceled by user")
		require.Contains(t, why, "attempt 0 FAILED: exit status 3")
	})
	t.Run("a finished job's restart is labelled as one, not shown as its failure", func(t *testing.T) {
		c.Submit("ui-flaky", `{"name": "ui-flaky", "vertices": [
			{"id": "once", "parallelism": 1, "command": ["sh", "-c", "[ \"$JOBMASTER_ATTEMPT\" -ge 1 ] || exit 3"]}],
			"restart": {"strategy": "fixed-delay", "delay": "100ms", "attempts": 2}}`)
		var msg string
		browse(t, ctx, "ui-flaky FINISHED after a restart", uiWait,
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs/ui-flaky")),
			js(`document.querySelector('#job-status')?.textContent === 'FINISHED'`),
			js(`!document.querySelector('#job-message').hidden`),
			eval(`document.querySelector('#job-message').textContent`, &msg))
		require.True(t, strings.HasPrefix(msg, "Last restart: "), msg)
		require.Contains(t, msg, "ui-flaky/once/0/0")
	})
	t.Run("a job whose next region cannot be placed says what it waits for", func(t *testing.T) {
		c.Submit("ui-waits", `{"name": "ui-waits", "vertices": [
			{"id": "a", "parallelism": 1, "command": ["true"]},
			{"id": "b", "parallelism": 50, "command": ["true"], "inputs": [{"from": "a", "mode": "blocking"}]}]}`)
		browse(t, ctx, "ui-waits waiting for slots, then cancelled", uiWait,
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs/ui-waits")),
			js(`document.querySelector('#job-waiting')?.textContent.includes('a region waits for 50 free slots at once')`),
			chromedp.Click(chromedp.CSS("#cancel")),
			js(`document.querySelector('#cancel').textContent === 'Confirm cancel'`),
			chromedp.Click(chromedp.CSS("#cancel")),
			js(`document.querySelector('#job-status').textContent === 'CANCELED'`),
			js(`!document.querySelector('#job-waiting')`))
	})
	t.Run("a job whose next region waits for a draining executor says so, and for how long at most", func(t *testing.T) {
		// c/0 shares a/0's slot (one slot sharing group per job); a runs on
		// when b has finished, so c waits for a's executor, drained
		// before b ends.
		gate := filepath.Join(t.TempDir(), "go")
		c.Submit("ui-drain", fmt.Sprintf(`{"name": "ui-drain", "vertices": [
			{"id": "a", "parallelism": 1, "command": ["sleep", "300"]},
			{"id": "b", "parallelism": 1, "command": ["sh", "-c", %q]},
			{"id": "c", "parallelism": 1, "command": ["true"], "inputs": [{"from": "b", "mode": "blocking", "distribution": "forward"}]}]}`, awaitFile(gate)))
		var on string
		WaitFor(t, "a and b to run", uiWait, func() bool {
			st := subtasks(c.Job("ui-drain"))
			on = st["a/0"].Executor
			return st["a/0"].State == "RUNNING" && st["b/0"].State == "RUNNING"
		})
		_, err := c.Client.DrainExecutor(c.ctx(), on, "300s")
		require.NoError(t, err)
		defer func() { _, _ = c.Client.UndrainExecutor(c.ctx(), on) }()
		require.NoError(t, os.WriteFile(gate, nil, 0o644))
		var note string
		browse(t, ctx, "ui-drain waiting for "+on, uiWait,
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs/ui-drain")),
			js(`document.querySelector('#job-waiting')?.textContent.includes('which is draining')`),
			eval(`document.querySelector('#job-waiting').textContent`, &note))
		require.Contains(t, note, "a region waits for its tasks on "+on+", which is draining, to end there or be moved at the drain's deadline (in 4m ")
		require.NoError(t, c.Client.CancelJob(c.ctx(), "ui-drain"))
		c.WaitJob("ui-drain", uiWait, "CANCELED")
	})
	t.Run("a job's page opened before the job is submitted shows it once it is", func(t *testing.T) {
		browse(t, ctx, "the page of a job not yet submitted", uiWait,
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/jobs/ui-later")),
			js(`!document.querySelector('#job-missing')?.hidden && document.querySelector('#job-missing').textContent.includes('No such job')`))
		c.Submit("ui-later", `{"name": "ui-later", "vertices": [{"id": "v", "parallelism": 1, "command": ["true"]}]}`)
		browse(t, ctx, "the same page showing the job", uiWait,
			js(`document.querySelector('#job-status')?.textContent === 'FINISHED'`),
			js(`document.querySelector('#job-missing').hidden`),
			chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="v"][data-state="FINISHED"]`)))
	})
	// The logs are read through a master that does not lead, from a page
	// it served.
	var follower *Node
	for _, m := range c.Masters {
		if m.ID != leader.ID {
			follower = m
			break
		}
	}
	t.Run("a subtask's log opens in its job's page, as text, stdout and stderr", func(t *testing.T) {
		c.Submit("ui-log", `{"name": "ui-log", "vertices": [{"id": "v", "parallelism": 1, "command": ["sh", "-c",
			"echo hello from ui-log; echo '<b>not markup</b>'; echo to stderr >&2"]}]}`)
		c.WaitJob("ui-log", uiWait, "FINISHED")
		uiSignIn(t, c, ctx, follower.HTTPAddr, c.ManagementToken)
		var text, from string
		browse(t, ctx, "ui-log's stdout", uiWait,
			chromedp.Navigate(c.URL(follower.HTTPAddr, "/ui/#/jobs/ui-log")),
			chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="v"][data-state="FINISHED"] .log-open`)),
			chromedp.Click(chromedp.CSS(`#subtasks tr[data-vertex="v"] .log-open`)),
			js(`document.querySelector('#log')?.dataset.state === 'shown'`),
			js(`document.querySelector('#log-execution').textContent === 'ui-log/v/0/0'`),
			eval(`document.querySelector('#log-text').textContent`, &text),
			eval(`document.querySelector('#log-from').textContent`, &from))
		require.Equal(t, "hello from ui-log\n<b>not markup</b>\n", text)
		require.Zero(t, countOf(t, ctx, `#log-text b`), "the log's text was read as markup")
		require.Contains(t, from, "through "+follower.HTTPAddr)
		browse(t, ctx, "ui-log's stderr", uiWait,
			chromedp.Click(chromedp.CSS(`#log .seg[data-stream="stderr"]`)),
			js(`document.querySelector('#log').dataset.state === 'shown' && document.querySelector('#log-text').textContent === 'to stderr\n'`))
	})
	t.Run("a token that reads 16 logs through one master at once is told so", func(t *testing.T) {
		c.Submit("ui-busy", `{"name": "ui-busy", "vertices": [{"id": "v", "parallelism": 1, "command": ["sh", "-c", "echo busy; sleep 600"]}]}`)
		WaitFor(t, "ui-busy to run", uiWait, func() bool { return c.Job("ui-busy").Vertices[0].Subtasks[0].State == wire.StateRunning })
		rctx, cancel := context.WithCancel(c.ctx())
		defer cancel()
		for range 16 {
			r := c.readLogVia(t, rctx, follower.HTTPAddr, c.ManagementToken, "ui-busy/v/0/0", url.Values{"follow": {"1"}})
			require.Equal(t, http.StatusOK, r.status, r.text())
		}
		var status string
		browse(t, ctx, "ui-busy's log, one too many", uiWait,
			chromedp.Navigate(c.URL(follower.HTTPAddr, "/ui/#/jobs/ui-busy")),
			chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="v"][data-state="RUNNING"] .log-open`)),
			chromedp.Click(chromedp.CSS(`#subtasks tr[data-vertex="v"] .log-open`)),
			js(`document.querySelector('#log')?.dataset.state === 'busy'`),
			eval(`document.querySelector('#log-status').textContent`, &status))
		require.Contains(t, status, "Too many logs are read with this token at once")
		require.Contains(t, status, "has 16 log reads relayed by master "+follower.ID+" already")
		cancel()
		require.NoError(t, c.Client.CancelJob(c.ctx(), "ui-busy"))
		c.WaitJob("ui-busy", uiWait, "CANCELED")
	})
	t.Run("a followed log shows a line printed later, and says when its task ended", func(t *testing.T) {
		gate := filepath.Join(t.TempDir(), "go")
		c.Submit("ui-follow", fmt.Sprintf(`{"name": "ui-follow", "vertices": [{"id": "v", "parallelism": 1, "command": ["sh", "-c", %q]}]}`,
			"echo early line; "+awaitFile(gate)+"echo later line"))
		// Whatever happens here, the task ends: the tests after this one
		// need its slot.
		defer func() { _ = os.WriteFile(gate, nil, 0o600) }()
		browse(t, ctx, "ui-follow's log, followed", uiWait,
			chromedp.Navigate(c.URL(follower.HTTPAddr, "/ui/#/jobs/ui-follow")),
			chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="v"][data-state="RUNNING"] .log-open`)),
			chromedp.Click(chromedp.CSS(`#subtasks tr[data-vertex="v"] .log-open`)),
			chromedp.WaitVisible(chromedp.CSS(`#log-follow`)),
			chromedp.Click(chromedp.CSS(`#log-follow`)),
			js(`document.querySelector('#log').dataset.state === 'following' && document.querySelector('#log-text').textContent === 'early line\n'`))
		require.NoError(t, os.WriteFile(gate, nil, 0o600))
		var status string
		browse(t, ctx, "the later line, and the task's end", uiWait,
			js(`document.querySelector('#log-text').textContent === 'early line\nlater line\n'`),
			js(`document.querySelector('#log').dataset.state === 'ended'`),
			eval(`document.querySelector('#log-status').textContent`, &status))
		require.Contains(t, status, "The task has ended")
		require.Contains(t, status, "its log is complete")
	})
	t.Run("a read token is told that logs need a submit or management token", func(t *testing.T) {
		read := c.Token("read", "ui-reader")
		browse(t, ctx, "signed out", uiWait,
			chromedp.Navigate(c.URL(follower.HTTPAddr, "/ui/#/jobs")),
			chromedp.WaitVisible(chromedp.CSS("#signout")),
			chromedp.Click(chromedp.CSS("#signout")),
			chromedp.WaitVisible(chromedp.CSS("#login #token")))
		uiSignIn(t, c, ctx, follower.HTTPAddr, read)
		var status, text string
		browse(t, ctx, "the log refused to a read token", uiWait,
			chromedp.Navigate(c.URL(follower.HTTPAddr, "/ui/#/jobs/ui-log")),
			chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="v"] .log-open`)),
			chromedp.Click(chromedp.CSS(`#subtasks tr[data-vertex="v"] .log-open`)),
			js(`document.querySelector('#log')?.dataset.state === 'forbidden'`),
			eval(`document.querySelector('#log-status').textContent`, &status),
			eval(`document.querySelector('#log-text').textContent`, &text),
			// Still signed in: the page goes on showing the job.
			js(`document.querySelector('#job-status')?.textContent === 'FINISHED' && !document.querySelector('#login')`),
			chromedp.Click(chromedp.CSS("#signout")),
			chromedp.WaitVisible(chromedp.CSS("#login #token")))
		require.Contains(t, status, "needs a submit or management token")
		require.Empty(t, text)
		// Left signed out: a test below signs in on this master's page.
	})
	t.Run("the masters page recovers from the death of its own master, the leader", func(t *testing.T) {
		browse(t, ctx, "the masters page", uiWait,
			chromedp.Navigate(c.URL(leader.HTTPAddr, "/ui/#/masters")),
			js(`document.querySelector('#leader-id')?.textContent === `+q(leader.ID)),
			js(`document.querySelectorAll('#masters-body tr').length === 3`),
		)
		killed := time.Now()
		leader.Kill()
		next := c.Leader()
		require.NotEqual(t, leader.ID, next.ID)
		var changes string
		browse(t, ctx, "the new leader on the page", uiWait,
			js(`document.querySelector('#leader-id')?.textContent === `+q(next.ID)),
			js(`document.querySelector('#conn').dataset.state === 'live'`),
			js(`document.querySelector('#leader-changes').textContent.includes(`+q(next.ID+" became the leader")+`)`),
			eval(`document.querySelector('#leader-changes').textContent`, &changes),
		)
		require.True(t, strings.Contains(changes, next.ID), changes)
		t.Logf("the page showed the new leader %s %.2fs after its own master, the leader %s, was killed", next.ID, time.Since(killed).Seconds(), leader.ID)
	})
	t.Run("a job's history says what is missing only when its own beginning is gone", func(t *testing.T) {
		at := c.Leader()
		snap, err := c.Client.SnapshotSave(c.ctx())
		require.NoError(t, err)
		// A restore: every event from before it is gone, on every master.
		_, err = c.Client.SnapshotRestore(c.ctx(), snap)
		require.NoError(t, err)
		c.Submit("ui-after", `{"name": "ui-after", "vertices": [{"id": "v", "parallelism": 1, "command": ["true"]}]}`)
		uiSignIn(t, c, ctx, at.HTTPAddr, c.ManagementToken) // another master: another origin
		browse(t, ctx, "the history of a job submitted since, whole", uiWait,
			chromedp.Navigate(c.URL(at.HTTPAddr, "/ui/#/jobs/ui-after")),
			js(`[...document.querySelectorAll('#history li[data-type="job-status"]')].some(li => li.textContent.includes('job CREATED'))`),
			js(`document.querySelector('#history-note').textContent === ''`))
		browse(t, ctx, "the history of a job from before, said to be cut", uiWait,
			chromedp.Navigate(c.URL(at.HTTPAddr, "/ui/#/jobs/ui-dag")),
			js(`document.querySelector('#history-note')?.textContent.includes('is no longer held by the masters')`),
			js(`!document.querySelector('#history').textContent.includes('No restart and no failure.')`)) // what is gone is not vouched for
	})
	t.Run("the executors page says when a drain moves what runs, and a drained executor is drained only", func(t *testing.T) {
		busy := c.runSleeper(t, "ui-sleep")
		idle := "e1"
		if busy == "e1" {
			idle = "e2"
		}
		for _, ex := range []string{busy, idle} {
			_, err := c.Client.DrainExecutor(c.ctx(), ex, "1h")
			require.NoError(t, err)
		}
		at := c.Leader()
		browse(t, ctx, "the drains on the executors page", uiWait,
			chromedp.Navigate(c.URL(at.HTTPAddr, "/ui/#/executors")),
			js(`document.querySelector('#executors-body tr[data-executor=`+q(busy)+`]')?.textContent.includes('moved in')`),
			js(`document.querySelector('#executors-body tr[data-executor=`+q(idle)+`] .pill[data-state="DRAINED"]') !== null`),
			js(`document.querySelector('#executors-body tr[data-executor=`+q(idle)+`] .pill[data-state="DRAINING"]') === null`))
		for _, ex := range []string{busy, idle} {
			_, err := c.Client.UndrainExecutor(c.ctx(), ex)
			require.NoError(t, err)
		}
		require.NoError(t, c.Client.CancelJob(c.ctx(), "ui-sleep"))
	})
	t.Run("a running subtask whose executor is not heard from says so", func(t *testing.T) {
		ex := c.runSleeper(t, "ui-quiet")
		at := c.Leader()
		browse(t, ctx, "ui-quiet running", uiWait,
			chromedp.Navigate(c.URL(at.HTTPAddr, "/ui/#/jobs/ui-quiet")),
			chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="v"][data-state="RUNNING"]`)))
		n := c.Node(ex)
		n.Pause() // its task goes on; the executor answers nothing
		browse(t, ctx, "the note on the running subtask", uiWait,
			js(`document.querySelector('#subtasks tr[data-vertex="v"] .why')?.textContent.includes('executor not heard for')`))
		n.Resume()
		require.NoError(t, c.Client.CancelJob(c.ctx(), "ui-quiet"))
	})
	t.Run("of more subtasks than the table shows, those with something to say come first", func(t *testing.T) {
		// big cannot be placed (more slots than the executors have) and
		// waits; bad fails once, runs again and finishes.
		c.Submit("ui-many", `{"name": "ui-many", "vertices": [
			{"id": "big", "parallelism": 1001, "command": ["true"]},
			{"id": "bad", "parallelism": 1, "command": ["sh", "-c", "[ \"$JOBMASTER_ATTEMPT\" != 0 ]"]}],
			"restart": {"strategy": "fixed-delay", "attempts": 3, "delay": "0s"}}`)
		at := c.Leader()
		browse(t, ctx, "bad among the rows shown", uiWait,
			chromedp.Navigate(c.URL(at.HTTPAddr, "/ui/#/jobs/ui-many")),
			chromedp.WaitVisible(chromedp.CSS(`#subtasks tr[data-vertex="bad"]`)),
			js(`document.querySelectorAll('#subtasks tr[data-vertex]').length === 1000`))
	})
	t.Run("an id that is no job id is no job page, and nothing is followed", func(t *testing.T) {
		at := c.Leader()
		browse(t, ctx, "the page of a/b", uiWait,
			chromedp.Navigate(c.URL(at.HTTPAddr, "/ui/#/jobs/a%2Fb")),
			chromedp.WaitVisible(chromedp.CSS(`#job-invalid`)),
			js(`document.querySelector('#job-invalid').textContent.includes('is no job id')`))
	})
	// Last: it leaves the cluster without a quorum.
	t.Run("with no leader the jobs page shows what its master knows, and says so", func(t *testing.T) {
		at := c.Leader()
		for _, m := range c.Masters {
			if m.ID != at.ID && m.Running() {
				m.Kill() // with the master killed above, no quorum is left
				break
			}
		}
		browse(t, ctx, "the jobs, read stale", uiWait,
			chromedp.Navigate(c.URL(at.HTTPAddr, "/ui/#/jobs")),
			js(`document.querySelector('#error')?.textContent.includes('No master knows a leader')`),
			chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-job="ui-dag"]`)))
	})
	// Nothing the page did was blocked by its CSP, and no script failed.
	var problems string
	browse(t, ctx, "the page's own errors", uiWait,
		eval(`JSON.stringify(window.jobmaster)`, &problems))
	require.JSONEq(t, `{"errors": [], "cspViolations": []}`, problems)
}
