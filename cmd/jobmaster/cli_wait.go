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
	"jobmaster/jobspec"
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
	// note shows why the job is not moving ("" clears it).
	note(msg string)
	// failed shows a failed attempt (or a restart's cause) as it happens,
	// elapsed into the wait.
	failed(line string, elapsed time.Duration)
	// close ends the view, leaving the cursor at the start of a line.
	close()
}

// defaultStuckAfter is how long a job may sit with nothing placed before a
// waiting command asks the cluster why; it asks again every recheckEvery.
const (
	defaultStuckAfter = 2 * time.Second
	recheckEvery      = 5 * time.Second
)

// slotNote explains why a job has nothing placed: the free slots of the
// executors that take work (alive, not draining, disk not full) against
// need, the slots the job needs to start (jobspec.StartSlots; 0 when the
// spec is not at hand). With enough slots free, what a job whose tasks
// declare resources waits for is their CPU or memory. It is "" when
// something is placed.
// waitNote is slotNote with what w knows of the job's spec, else what the
// job's answer says of it.
//
// A job that runs may wait too: a region whose inputs are ready (its
// upstream regions finished) and that needs more slots at once than are
// free (api.Job.WaitingSlots) is said as such.
func waitNote(job *api.Job, cl *api.Cluster, w waitOpts) string {
	if !awaitsPlacement(job) {
		if waitsForARegion(job) && job.WaitingForDrain != "" {
			return drainNote(job, time.Now())
		}
		if waitsForARegion(job) {
			return regionNote(cl, job.WaitingSlots, w.resources || job.DeclaresResources)
		}
		return ""
	}
	need := w.need
	if need == 0 {
		need = job.StartSlots
	}
	return slotNote(job, cl, need, w.resources || job.DeclaresResources)
}

// waitsForARegion reports whether a job that has started has a region
// ready to run and not placed (its answer's waiting_slots, as read).
func waitsForARegion(job *api.Job) bool {
	return (job.WaitingSlots > 0 || job.WaitingForDrain != "") && (job.Status == "RUNNING" || job.Status == "RESTARTING")
}

// drainNote says that the job's next region waits for its tasks on the
// draining executor its answer names, and until when at the latest.
func drainNote(job *api.Job, now time.Time) string {
	ex, when := job.WaitingForDrain, "at the drain's deadline at the latest"
	if job.WaitingForDrainDeadline > 0 {
		if left := time.UnixMilli(job.WaitingForDrainDeadline).Sub(now).Round(time.Second); left > 0 {
			when = fmt.Sprintf("at the drain's deadline at the latest (in %s)", left)
		} else {
			when = "now that the drain's deadline has passed"
		}
	}
	return fmt.Sprintf("Waiting: its next region shares slots with its tasks on %s, which is draining and takes no new work; it goes on when they end there, or are moved %s ('jobmaster executors drain %s --disable' ends the drain).", ex, when, ex)
}

// mayWaitForARegion reports whether a job that has started has subtasks
// waiting to be placed and none on its way to an executor: a region of
// it may wait for slots (what a job followed by its events can tell; its
// answer says whether one does, and for how many).
func mayWaitForARegion(job *api.Job) bool {
	if job.Status != "RUNNING" && job.Status != "RESTARTING" {
		return false
	}
	scheduled := false
	for _, v := range job.Vertices {
		for _, st := range v.Subtasks {
			switch st.State {
			case "DEPLOYING":
				return false
			case "SCHEDULED":
				scheduled = true
			}
		}
	}
	return scheduled
}

func slotNote(job *api.Job, cl *api.Cluster, need int, resources bool) string {
	for _, v := range job.Vertices {
		for _, st := range v.Subtasks {
			if st.State != "SCHEDULED" {
				return ""
			}
		}
	}
	return fleetNote(cl, need, resources, toStart)
}

// regionNote is slotNote for a region of a running job whose inputs are
// ready and which needs need new slots at once.
func regionNote(cl *api.Cluster, need int, resources bool) string {
	return fleetNote(cl, need, resources, forNextRegion)
}

// waitingFor names, in a note, what a job waits to do.
type waitingFor struct {
	what   string // "it needs N slots at once <what>"
	then   string // "it <then> when ..."
	enough string // "enough for the N it needs<enough>" (a start goes without saying)
	// freedBy: who frees the slots it waits for.
	freedBy string
	// onlyWhenShort: nothing is said while the slots free are enough (a
	// region whose inputs have just finished is placed at the next pass).
	onlyWhenShort bool
}

var (
	toStart       = waitingFor{what: "to start", then: "starts", freedBy: "other jobs"}
	forNextRegion = waitingFor{what: "for its next region", then: "goes on", enough: " for its next region",
		freedBy: "its own running tasks or other jobs", onlyWhenShort: true}
)

// fleetNote says what the executors that take work offer against need,
// the slots the job needs at once for w (0: not known).
func fleetNote(cl *api.Cluster, need int, resources bool, w waitingFor) string {
	total, free, alive := 0, 0, 0
	var cpu, mem int64 // the most free on one executor
	var aside []string // alive executors that take no work, and why
	for _, x := range cl.Executors {
		if x.Status != "alive" && x.Status != api.ExecutorDrained || x.HTTPAddr == "" {
			continue // no address: stopped, listed for the drain it is under
		}
		alive++
		if x.Draining || x.DiskFull {
			why := "draining"
			if x.DiskFull {
				why = "disk full"
			}
			aside = append(aside, x.ID+" ("+why+")")
			continue
		}
		total += x.Slots
		free += x.FreeSlots
		if x.FreeCPUMillis != nil {
			cpu = max(cpu, *x.FreeCPUMillis)
		}
		if x.FreeMemoryMB != nil {
			mem = max(mem, *x.FreeMemoryMB)
		}
	}
	// Who frees what it waits for: an executor set aside (draining, disk
	// full) may take work again too.
	freed := w.freedBy + " free them"
	if len(aside) > 0 {
		freed += ", or an executor not counted takes work again"
	}
	note := func() string {
		switch {
		case alive == 0:
			return "Waiting: no executor is alive to run it (see 'jobmaster members')."
		case total == 0:
			return "Waiting: no executor takes work (each alive one is draining or its disk is full; see 'jobmaster executors list')."
		case need > total:
			return fmt.Sprintf("Waiting: it needs %d slots at once %s and the executors that take work have %d in all; it %s when more executors join.", need, w.what, total, w.then)
		case need > 0 && free >= need && !resources && w.onlyWhenShort:
			return ""
		case need > 0 && free >= need && resources:
			// What its tasks declare may fit only on more executors than
			// there are (a task per executor): joining ones free it too.
			return fmt.Sprintf("Waiting: %d of %d slots are free, enough for the %d it needs%s, but not the CPU or memory its tasks declare (the freest executor has %d millicores, %d MiB free); it %s when %s, or more executors join.", free, total, need, w.enough, cpu, mem, w.then, freed)
		case need > 0 && free >= need:
			return fmt.Sprintf("Waiting: %d of %d slots are free, enough for the %d it needs%s; the leader has not placed it yet (if it stays so, see the leader's log).", free, total, need, w.enough)
		case need > 0:
			return fmt.Sprintf("Waiting for slots: %d of %d are free; it needs %d at once %s, and %s when %s.", free, total, need, w.what, w.then, freed)
		}
		return fmt.Sprintf("Waiting for slots: %d of %d are free; it starts when enough are free for its first region (and the CPU and memory its tasks declare).", free, total)
	}()
	if note != "" && len(aside) > 0 && total > 0 {
		const named = 5
		more := ""
		if len(aside) > named {
			more = fmt.Sprintf(" and %d more", len(aside)-named)
			aside = aside[:named]
		}
		note += " Not counted: " + strings.Join(aside, ", ") + more + "."
	}
	return note
}

// waitOpts is how a waiting command polls: every interval; after
// stuckAfter with nothing placed it says why, knowing the job needs need
// slots to start (0: unknown) and whether its tasks declare resources.
type waitOpts struct {
	interval, stuckAfter time.Duration
	need                 int
	resources            bool
}

// waitJob polls job id every interval, showing each answer on view, until
// the job reaches a terminal status (followJob reads the event stream
// instead, and falls back to this). It returns the last job seen and how
// long it waited; errStoppedWaiting when ctx ends first. Each poll fails
// over between masters like any call, so a master failover does not end the
// wait; a poll that fails for good does.
//
// A job that waits with nothing placed (awaitsPlacement) for stuckAfter gets a note
// on the view saying why (slotNote); each failed attempt a poll sees is
// shown once.
func waitJob(ctx context.Context, c *client.Client, id string, view progressView, w waitOpts) (*api.Job, time.Duration, error) {
	return pollJob(ctx, c, id, view, w, time.Now(), &failureLog{said: map[string]bool{}}, true)
}

// pollJob is waitJob from start, with the failures already said.
// fresh: nothing was read of the job before, so the failures the first
// answer holds happened before the wait began (shown as such).
func pollJob(ctx context.Context, c *client.Client, id string, view progressView, w waitOpts, start time.Time, fails *failureLog, fresh bool) (*api.Job, time.Duration, error) {
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	var last *api.Job
	stuck := newStuckCheck(w)
	for {
		job, err := c.Job(ctx, id)
		if ctx.Err() != nil {
			return last, time.Since(start), errStoppedWaiting
		}
		if err != nil {
			return last, time.Since(start), fmt.Errorf("waiting for job %q: %w", id, notFound(err, id))
		}
		last = job
		stuck.check(ctx, c, job, view)
		at := time.Since(start)
		if fresh {
			at, fresh = earlier, false
		}
		for _, line := range fails.fromJob(job) {
			view.failed(line, at)
		}
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

// follow waits for job id to end, showing its progress as newView picks;
// spec is the job's, when at hand (for the note if it waits).
func (o *clientOpts) follow(cmd *cobra.Command, c *client.Client, id string, spec *jobspec.Spec) (*api.Job, time.Duration, error) {
	o.waiting = true
	defer func() { o.waiting = false }()
	view := o.newView(cmd)
	defer view.close()
	return followJob(cmd.Context(), c, id, view, o.env.waitOpts(spec))
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

// sinceView shows elapsed times counted from offset earlier than the wait.
type sinceView struct {
	progressView
	offset time.Duration
}

func (v sinceView) show(job *api.Job, elapsed time.Duration) {
	v.progressView.show(job, v.offset+elapsed)
}

func (v sinceView) failed(line string, elapsed time.Duration) {
	if elapsed != earlier {
		elapsed += v.offset
	}
	v.progressView.failed(line, elapsed)
}

// quietView shows nothing (--json prints the final job instead).
type quietView struct{}

func (quietView) show(*api.Job, time.Duration) {}
func (quietView) note(string)                  {}
func (quietView) failed(string, time.Duration) {}
func (quietView) close()                       {}

// lineView prints one line per change of the job, prefixed with the
// elapsed time.
type lineView struct {
	w    io.Writer
	last string
	said string // the last note printed
}

func (v *lineView) note(msg string) {
	if msg != "" && msg != v.said {
		fmt.Fprintln(v.w, msg)
	}
	v.said = msg
}

func (v *lineView) show(job *api.Job, elapsed time.Duration) {
	line := progressLine(job)
	if line == v.last {
		return
	}
	v.last = line
	fmt.Fprintf(v.w, "%s %s\n", formatElapsed(elapsed), line)
}

func (v *lineView) failed(line string, elapsed time.Duration) {
	fmt.Fprintf(v.w, "%s %s\n", failureStamp(elapsed), line)
}

func (v *lineView) close() {}

// liveView redraws the job in place on a terminal.
type liveView struct {
	w     io.Writer
	size  func() termSize
	drawn int      // lines of the last frame
	msg   string   // the note, drawn under the frame
	fails []string // the latest failures, drawn under the frame
}

func (v *liveView) note(msg string) { v.msg = msg }

// liveFailures is how many of the latest failures a live view shows.
const liveFailures = 3

func (v *liveView) failed(line string, elapsed time.Duration) {
	v.fails = append(v.fails, failureStamp(elapsed)+" "+line)
	if len(v.fails) > liveFailures {
		v.fails = v.fails[len(v.fails)-liveFailures:]
	}
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
	v.frame(liveLines(job, elapsed, v.size()))
}

// frame draws lines in place of the last frame, with the latest failures
// and the note under them.
func (v *liveView) frame(lines []string) {
	size := v.size()
	for _, extra := range append(append([]string(nil), v.fails...), v.msg) {
		if extra == "" {
			continue
		}
		extra = "  " + extra
		if size.width > 0 {
			extra = truncate(extra, size.width-1)
		}
		lines = append(lines, extra)
	}
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

// notFound turns a 404 for job id into a plain "not found" error, with
// what the master says of the id (that a job of it was forgotten).
func notFound(err error, id string) error {
	if client.IsNotFound(err) {
		var ae *client.APIError
		if prefix := fmt.Sprintf("job %q not found: ", id); errors.As(err, &ae) && strings.HasPrefix(ae.Message, prefix) {
			return errors.New(ae.Message)
		}
		return fmt.Errorf("job %q not found", id)
	}
	return err
}
