package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/wire"
)

// The commands that follow a job (job run --wait, job status --follow, job
// cancel --wait) read the masters' event stream: the job as it was read,
// then every change to it, applied as it comes. A failed attempt is shown
// with its reason the moment it is recorded. When the masters serve no
// stream, or it cannot be had, they poll instead (waitJob).

// followTopics are the event topics a follower reads.
var followTopics = []string{"job", "execution"}

// streamLine is what the stream's reader hands the follower.
type streamLine struct {
	ev  api.Event
	err error
}

// followJob follows job id until it ends, showing it on view. It returns
// the job as it ended (read again, so exactly as the masters have it), how
// long it followed, and errStoppedWaiting when ctx ends first.
func followJob(ctx context.Context, c *client.Client, id string, view progressView, w waitOpts) (*api.Job, time.Duration, error) {
	start := time.Now()
	since := func() time.Duration { return time.Since(start) }
	job, index, err := c.JobAt(ctx, id)
	if ctx.Err() != nil {
		return nil, since(), errStoppedWaiting
	}
	if err != nil {
		return nil, since(), fmt.Errorf("waiting for job %q: %w", id, notFound(err, id))
	}
	fails := &failureLog{said: map[string]bool{}}
	for _, line := range fails.fromJob(job) {
		view.failed(line, earlier)
	}
	view.show(job, since())
	if terminalStatus(job.Status) {
		return job, since(), nil
	}
	if index == 0 { // a master that does not say its index serves no stream
		return pollJob(ctx, c, id, view, w, start, fails, false)
	}
	r, err := openStream(ctx, c, id, index)
	if err != nil {
		if ctx.Err() != nil {
			return job, since(), errStoppedWaiting
		}
		return pollJob(ctx, c, id, view, w, start, fails, false)
	}
	defer func() { r.stop() }()
	stuck := newStuckCheck(w)
	tick := time.NewTicker(time.Second) // the elapsed time moves on
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return job, since(), errStoppedWaiting
		case <-tick.C:
			stuck.check(ctx, c, job, view)
			view.show(job, since())
			continue
		case l := <-r.next():
			if _, gone := errors.AsType[*client.EventsGoneError](l.err); gone {
				// What came next is no longer held: read the job again
				// and go on from where that read stands.
				r.stop()
				if job, index, err = c.JobAt(ctx, id); err != nil {
					return job, since(), fmt.Errorf("waiting for job %q: %w", id, notFound(err, id))
				}
				if r, err = openStream(ctx, c, id, index); err != nil {
					return pollJob(ctx, c, id, view, w, start, fails, false)
				}
				continue
			}
			if l.err != nil {
				if ctx.Err() != nil {
					return job, since(), errStoppedWaiting
				}
				return pollJob(ctx, c, id, view, w, start, fails, false)
			}
			// Apply what has come so far, then show the job once: an entry
			// that changes a thousand subtasks is one line, not a thousand.
			ended, cut := false, false
			for more := true; more; {
				if l.ev.Type != api.EventHeartbeat {
					if line := fails.fromEvent(l.ev); line != "" {
						view.failed(line, since())
					}
					applyEvent(job, l.ev)
					ended = ended || terminalStatus(job.Status) || l.ev.Type == "job-forgotten"
				}
				select {
				case l = <-r.lines:
					if l.err != nil {
						cut, more = true, false
					}
				default:
					more = false
				}
			}
			stuck.check(ctx, c, job, view)
			view.show(job, since())
			if cut && !ended {
				// The error comes again from the next read: put it back.
				r.pending = &l
			}
			if ended {
				final, err := c.Job(ctx, id)
				if err != nil {
					return job, since(), fmt.Errorf("waiting for job %q: %w", id, notFound(err, id))
				}
				view.show(final, since())
				return final, since(), nil
			}
		}
	}
}

// streamReader reads one event stream in a goroutine of its own.
type streamReader struct {
	lines chan streamLine
	stop  context.CancelFunc
	// pending is a line taken from lines but not handled yet.
	pending *streamLine
}

// next is where the next line comes from.
func (r *streamReader) next() <-chan streamLine {
	if r.pending == nil {
		return r.lines
	}
	ch := make(chan streamLine, 1)
	ch <- *r.pending
	r.pending = nil
	return ch
}

// openStream opens the events of job id after index.
func openStream(ctx context.Context, c *client.Client, id string, index uint64) (*streamReader, error) {
	sctx, stop := context.WithCancel(ctx)
	s, err := c.Events(sctx, client.EventsQuery{Index: index, Topics: followTopics, Job: id})
	if err != nil {
		stop()
		return nil, err
	}
	r := &streamReader{lines: make(chan streamLine, 1024), stop: stop}
	go func() {
		defer s.Close()
		for {
			ev, err := s.Next()
			select {
			case r.lines <- streamLine{ev, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return r, nil
}

// applyEvent applies a change of the job to the copy the follower shows.
func applyEvent(job *api.Job, ev api.Event) {
	switch ev.Type {
	case "job-status":
		job.Status, job.Message = ev.State, ev.Message
		if ev.Restarts != nil {
			job.Restarts = *ev.Restarts
		}
	case "execution-state":
		if ev.Subtask == nil || ev.Attempt == nil {
			return
		}
		for vi := range job.Vertices {
			v := &job.Vertices[vi]
			if v.ID != ev.Vertex {
				continue
			}
			for si := range v.Subtasks {
				s := &v.Subtasks[si]
				if s.Index != *ev.Subtask || *ev.Attempt < s.Attempt {
					continue
				}
				if *ev.Attempt > s.Attempt && s.State.Terminal() {
					s.PreviousAttempt = &api.PreviousAttempt{Attempt: s.Attempt, State: s.State, Message: s.Message, EndTime: s.EndTime}
				}
				s.Attempt, s.State, s.ExecutionID, s.Executor = *ev.Attempt, wire.State(ev.State), ev.Execution, ev.Executor
				s.Message = ev.Message
				if s.State.Terminal() {
					s.EndTime = ev.Time
				} else {
					s.EndTime = 0
				}
			}
		}
	}
}

// failureLog says each failed attempt once, as it is seen.
type failureLog struct{ said map[string]bool }

// failureLine is how a follower shows a failed attempt.
func failureLine(vertex string, subtask, attempt int, state wire.State, msg string) string {
	line := fmt.Sprintf("%s/%d attempt %d %s", vertex, subtask, attempt, state)
	if msg != "" {
		line += ": " + oneLine(msg)
	}
	return line
}

// fromEvent is the line of an event that records a failure, "" for any
// other: a FAILED execution, and a restart for a cause no execution's
// FAILED shows (one stopped by its lease or its executor's shutdown, a
// partition lost).
func (f *failureLog) fromEvent(ev api.Event) string {
	switch {
	case ev.Type == "execution-state" && ev.State == string(wire.StateFailed) && ev.Subtask != nil && ev.Attempt != nil:
		if f.said[ev.Execution] {
			return ""
		}
		f.said[ev.Execution] = true
		return failureLine(ev.Vertex, *ev.Subtask, *ev.Attempt, wire.StateFailed, ev.Message)
	case ev.Type == "job-restart" && (ev.Reason == "task_canceled" || ev.Reason == "partition_lost"):
		return "restarting: " + oneLine(ev.Message)
	}
	return ""
}

// fromJob is the lines of the failures a read of the job shows that were
// not said yet: a FAILED current attempt, or a FAILED one a restart
// replaced.
func (f *failureLog) fromJob(job *api.Job) []string {
	var out []string
	for _, v := range job.Vertices {
		for _, s := range v.Subtasks {
			if p := s.PreviousAttempt; p != nil && p.State == wire.StateFailed {
				id := fmt.Sprintf("%s/%s/%d/%d", job.ID, v.ID, s.Index, p.Attempt)
				if !f.said[id] {
					f.said[id] = true
					out = append(out, failureLine(v.ID, s.Index, p.Attempt, p.State, p.Message))
				}
			}
			if s.State == wire.StateFailed && s.ExecutionID != "" && !f.said[s.ExecutionID] {
				f.said[s.ExecutionID] = true
				out = append(out, failureLine(v.ID, s.Index, s.Attempt, s.State, s.Message))
			}
		}
	}
	return out
}

// stuckCheck says why a job has nothing placed once it has waited for
// stuckAfter, asking the cluster again every recheckEvery.
type stuckCheck struct {
	w              waitOpts
	since, checked time.Time
}

func newStuckCheck(w waitOpts) *stuckCheck { return &stuckCheck{w: w} }

// awaitsPlacement reports whether job waits to be placed with nothing
// placed: CREATED, or RUNNING or RESTARTING with every subtask SCHEDULED
// (its work moved, after a restart or a drain, and not placed again).
func awaitsPlacement(job *api.Job) bool {
	switch job.Status {
	case "CREATED":
		return true
	case "RUNNING", "RESTARTING":
	default:
		return false
	}
	for _, v := range job.Vertices {
		for _, st := range v.Subtasks {
			if st.State != "SCHEDULED" {
				return false
			}
		}
	}
	return true
}

func (s *stuckCheck) check(ctx context.Context, c *client.Client, job *api.Job, view progressView) {
	now := time.Now()
	switch {
	case !awaitsPlacement(job) && !mayWaitForARegion(job):
		if !s.since.IsZero() {
			view.note("")
		}
		s.since = time.Time{}
	case s.since.IsZero():
		s.since = now
	case now.Sub(s.since) >= s.w.stuckAfter && (s.checked.IsZero() || now.Sub(s.checked) >= recheckEvery):
		s.checked = now
		if !awaitsPlacement(job) {
			// What waits, and for how many slots, is read afresh: the
			// view follows the job's subtasks, not its waiting_slots.
			fresh, err := c.Job(ctx, job.ID)
			if err != nil {
				return
			}
			job = fresh
		}
		if cl, err := c.Cluster(ctx); err == nil {
			view.note(waitNote(job, cl, s.w))
		}
	}
}
