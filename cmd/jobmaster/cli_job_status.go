package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/api"
	"jobmaster/client"
)

// newJobStatusCmd builds `jobmaster job status ID [--follow] [--stale]`.
func newJobStatusCmd(o *clientOpts) *cobra.Command {
	var follow, short bool
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a job and the current attempt of each of its subtasks",
		Long: `Show a job and the current attempt of each of its subtasks: its state,
attempt and executor, why it ended, and for a subtask that restarted, how its
previous attempt ended (PREVIOUS ATTEMPT: the reason it failed, or that it
ran again with its region). A live subtask whose executor the
leader has not heard from for 2s or more is marked "executor not heard for
Ns": it may be gone, and is shown as it was until the executor timeout
declares its executor lost. A job that waits to be placed, with nothing
placed, gets a last line saying why (the slots it needs at once against
those the executors have).

With --short it leaves the subtasks out: a line per vertex says how many
are in each state (for a wide job, whose subtasks fill pages).

With --follow the command shows the job as it changes until it ends (exit 0
if it FINISHED, 1 otherwise), each failed attempt as it happens.`,
		Example: "  jobmaster job status wc-1\n  jobmaster job status wc-1 --short   # a line per vertex\n  jobmaster job status wc-1 --follow\n  jobmaster job status wc-1 --stale   # with most masters down",
		Args:    exactArgs("ID"),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			if follow {
				if short {
					return usageErrorf(cmd, "--short does not go with --follow, which shows a line per vertex as the job changes")
				}
				return followStatus(cmd, o, c, args[0])
			}
			job, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return notFound(err, args[0])
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), job)
			}
			var notes map[string]string
			cl, err := c.Cluster(cmd.Context())
			if err == nil {
				notes = silentNotes(cl)
			}
			fmt.Fprint(cmd.OutOrStdout(), formatJobStatusAs(job, time.Now(), notes, short))
			if cl != nil && (awaitsPlacement(job) || waitsForARegion(job)) {
				if note := waitNote(job, cl, waitOpts{}); note != "" {
					fmt.Fprintln(cmd.OutOrStdout(), "\n"+note)
				}
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&follow, "follow", false, "show the job as it changes until it ends; exit 0 only if it FINISHED")
	cmd.Flags().BoolVar(&short, "short", false, "leave the subtasks out: a line per vertex with how many are in each state")
	o.staleFlag(cmd)
	return cmd
}

// followStatus is `job status --follow`: the status redrawn in place on a
// terminal, else progress lines; with --json, the job as it ended.
func followStatus(cmd *cobra.Command, o *clientOpts, c *client.Client, id string) error {
	out := cmd.OutOrStdout()
	o.waiting = true
	defer func() { o.waiting = false }()
	var view progressView
	if _, ok := o.env.terminal(out); ok && !o.json {
		view = newStatusView(out, cmd, c, func() termSize {
			size, _ := o.env.terminal(out)
			return size
		})
	} else {
		view = o.newView(cmd)
	}
	job, elapsed, err := followJob(cmd.Context(), c, id, view, o.env.waitOpts(nil))
	view.close()
	if errors.Is(err, errStoppedWaiting) {
		return &exitError{code: exitInterrupted}
	}
	if err != nil {
		return err
	}
	if o.json {
		if err := printJSON(out, job); err != nil {
			return err
		}
	}
	return jobOutcome(out, job, elapsed, !o.json)
}

// statusView redraws `job status` in place, with the latest failures under
// it.
type statusView struct {
	live *liveView
	cmd  *cobra.Command
	c    *client.Client
	// notes is what silentNotes said when last asked, at asked.
	notes map[string]string
	asked time.Time
}

func newStatusView(w io.Writer, cmd *cobra.Command, c *client.Client, size func() termSize) *statusView {
	return &statusView{live: newLiveView(w, size), cmd: cmd, c: c}
}

func (v *statusView) note(msg string)                           { v.live.note(msg) }
func (v *statusView) failed(line string, elapsed time.Duration) { v.live.failed(line, elapsed) }
func (v *statusView) close()                                    { v.live.close() }

func (v *statusView) show(job *api.Job, _ time.Duration) {
	// Whether executors answer is not in the job's events: ask the cluster,
	// at most every 2 seconds.
	if time.Since(v.asked) >= 2*time.Second {
		v.asked = time.Now()
		if cl, err := v.c.Cluster(v.cmd.Context()); err == nil {
			v.notes = silentNotes(cl)
		}
	}
	lines := strings.Split(strings.TrimSuffix(formatJobStatusNoting(job, time.Now(), v.notes), "\n"), "\n")
	if size := v.live.size(); size.width > 0 {
		for i, l := range lines {
			lines[i] = truncate(l, size.width-1)
		}
	}
	v.live.frame(lines)
}
