package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/api"
	"jobmaster/client"
)

// defaultPollInterval is how often a waiting command asks for the job.
const defaultPollInterval = 300 * time.Millisecond

// errStoppedWaiting is returned by waitJob when its context ends (Ctrl-C):
// the job itself is left alone.
var errStoppedWaiting = errors.New("stopped waiting")

// progressView shows a job while a command waits for it.
type progressView interface {
	// show displays the job as of elapsed time into the wait.
	show(job *api.Job, elapsed time.Duration)
	// close ends the view, leaving the cursor at the start of a line.
	close()
}

// waitJob polls job id every interval, showing each answer on view, until
// the job reaches a terminal status. It returns the last job seen and how
// long it waited; errStoppedWaiting when ctx ends first. Each poll fails
// over between masters like any call, so a master failover does not end the
// wait; a poll that fails for good does.
func waitJob(ctx context.Context, c *client.Client, id string, view progressView, interval time.Duration) (*api.Job, time.Duration, error) {
	start := time.Now()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var last *api.Job
	for {
		job, err := c.Job(ctx, id)
		if ctx.Err() != nil {
			return last, time.Since(start), errStoppedWaiting
		}
		if err != nil {
			return last, time.Since(start), fmt.Errorf("waiting for job %q: %w", id, notFound(err, id))
		}
		last = job
		view.show(job, time.Since(start))
		if terminalStatus(job.Status) {
			return job, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return last, time.Since(start), errStoppedWaiting
		case <-ticker.C:
		}
	}
}

// follow waits for job id to end, showing its progress as newView picks.
func (o *clientOpts) follow(cmd *cobra.Command, c *client.Client, id string) (*api.Job, time.Duration, error) {
	o.waiting = true
	defer func() { o.waiting = false }()
	view := o.newView(cmd)
	defer view.close()
	return waitJob(cmd.Context(), c, id, view, o.env.pollInterval)
}

// newView picks how a waiting command shows progress: nothing with --json,
// a live view redrawn in place on a terminal, else one line per change.
func (o *clientOpts) newView(cmd *cobra.Command) progressView {
	out := cmd.OutOrStdout()
	if o.json {
		return quietView{}
	}
	if _, ok := o.env.terminal(out); ok {
		return newLiveView(out, func() termSize {
			size, _ := o.env.terminal(out)
			return size
		})
	}
	return &lineView{w: out}
}

// cancelHint is the command that cancels job id, with the --address the
// user gave.
func (o *clientOpts) cancelHint(cmd *cobra.Command, id string) string {
	hint := "jobmaster job cancel " + id
	if cmd.Flags().Changed("address") {
		hint += " --address " + o.address
	}
	return hint
}

// quietView shows nothing (--json prints the final job instead).
type quietView struct{}

func (quietView) show(*api.Job, time.Duration) {}
func (quietView) close()                       {}

// lineView prints one line per change of the job, prefixed with the
// elapsed time.
type lineView struct {
	w    io.Writer
	last string
}

func (v *lineView) show(job *api.Job, elapsed time.Duration) {
	line := progressLine(job)
	if line == v.last {
		return
	}
	v.last = line
	fmt.Fprintf(v.w, "%s %s\n", formatElapsed(elapsed), line)
}

func (v *lineView) close() {}

// liveView redraws the job in place on a terminal.
type liveView struct {
	w     io.Writer
	size  func() termSize
	drawn int // lines of the last frame
}

// ANSI escapes used by liveView.
const (
	ansiHideCursor = "\x1b[?25l"
	ansiShowCursor = "\x1b[?25h"
	ansiClearLine  = "\r\x1b[2K"
	ansiClearBelow = "\x1b[J"
)

func newLiveView(w io.Writer, size func() termSize) *liveView {
	fmt.Fprint(w, ansiHideCursor)
	return &liveView{w: w, size: size}
}

func (v *liveView) show(job *api.Job, elapsed time.Duration) {
	lines := liveLines(job, elapsed, v.size())
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.drawn) // back to the frame's first line
	}
	for _, l := range lines {
		b.WriteString(ansiClearLine + l + "\n")
	}
	b.WriteString(ansiClearBelow)
	fmt.Fprint(v.w, b.String())
	v.drawn = len(lines)
}

func (v *liveView) close() {
	fmt.Fprint(v.w, ansiShowCursor)
}

// notFound turns a 404 for job id into a plain "not found" error.
func notFound(err error, id string) error {
	if client.IsNotFound(err) {
		return fmt.Errorf("job %q not found", id)
	}
	return err
}
