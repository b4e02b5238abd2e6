package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"jobmaster/api"
	"jobmaster/wire"
)

// Job statuses that end a job.
const (
	statusFinished = "FINISHED"
	statusFailed   = "FAILED"
	statusCanceled = "CANCELED"
)

// terminalStatus reports whether a job status is final.
func terminalStatus(s string) bool {
	return s == statusFinished || s == statusFailed || s == statusCanceled
}

// subtaskCounts counts the subtasks of a vertex (or of several) by state.
type subtaskCounts struct {
	total, running, finished, failed, canceling, canceled int
}

// countSubtasks counts the current attempts of a vertex's subtasks.
// SCHEDULED and DEPLOYING count as none of the named states.
func countSubtasks(v api.Vertex) subtaskCounts {
	c := subtaskCounts{total: v.Parallelism}
	if c.total == 0 {
		c.total = len(v.Subtasks)
	}
	for _, s := range v.Subtasks {
		switch s.State {
		case wire.StateRunning:
			c.running++
		case wire.StateFinished:
			c.finished++
		case wire.StateFailed:
			c.failed++
		case wire.StateCanceling:
			c.canceling++
		case wire.StateCanceled:
			c.canceled++
		}
	}
	return c
}

// add sums two counts.
func (c subtaskCounts) add(o subtaskCounts) subtaskCounts {
	return subtaskCounts{
		total:     c.total + o.total,
		running:   c.running + o.running,
		finished:  c.finished + o.finished,
		failed:    c.failed + o.failed,
		canceling: c.canceling + o.canceling,
		canceled:  c.canceled + o.canceled,
	}
}

// summary is "R/T running F finished X failed", with " N canceling" and
// " C canceled" when some are.
func (c subtaskCounts) summary() string {
	s := fmt.Sprintf("%d/%d running %d finished %d failed", c.running, c.total, c.finished, c.failed)
	if c.canceling > 0 {
		s += fmt.Sprintf(" %d canceling", c.canceling)
	}
	if c.canceled > 0 {
		s += fmt.Sprintf(" %d canceled", c.canceled)
	}
	return s
}

// formatElapsed renders a duration compactly: 12.3s, 4m05s, 1h02m03s.
// earlier stands for the time of a failure shown that happened before the
// command began to follow the job (the job's answer holds the latest
// failed attempts of each subtask, not when they failed).
const earlier = time.Duration(math.MinInt64)

// failureStamp is what a failure line begins with: the time since the
// command began, or "before" for one that was there already.
func failureStamp(d time.Duration) string {
	if d == earlier {
		return "before"
	}
	return formatElapsed(d)
}

func formatElapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Truncate(100 * time.Millisecond)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	return fmt.Sprintf("%dh%02dm%02ds", int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second))
}

// formatTook renders how long something took as formatElapsed does, but
// in milliseconds under a tenth of a second: a quick job's run is not
// 0.0s.
func formatTook(d time.Duration) string {
	if d > 0 && d < 100*time.Millisecond {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return formatElapsed(d)
}

// maxLineVertices bounds the vertices shown one by one on a progress line;
// the others are summed up.
const maxLineVertices = 10

// progressLine renders the state of a job on one line, without the elapsed
// time: "RUNNING split: 4/4 running 0 finished 0 failed | count: ...".
func progressLine(job *api.Job) string {
	var b strings.Builder
	b.WriteString(job.Status)
	if job.Restarts > 0 {
		fmt.Fprintf(&b, " (restarts %d)", job.Restarts)
	}
	for i, v := range job.Vertices {
		sep := " | "
		if i == 0 {
			sep = " "
		}
		if i == maxLineVertices {
			var rest subtaskCounts
			for _, r := range job.Vertices[i:] {
				rest = rest.add(countSubtasks(r))
			}
			fmt.Fprintf(&b, "%s%d more vertices: %s", sep, len(job.Vertices)-i, rest.summary())
			break
		}
		fmt.Fprintf(&b, "%s%s: %s", sep, v.ID, countSubtasks(v).summary())
	}
	return b.String()
}

// barWidth is the width of a vertex's progress bar, brackets excluded.
const barWidth = 20

// progressBar draws the subtasks of a vertex: '=' finished, '>' running,
// '!' failed, '.' anything else.
func progressBar(c subtaskCounts) string {
	cells := func(n int) int {
		if n <= 0 || c.total <= 0 {
			return 0
		}
		return max(1, n*barWidth/c.total)
	}
	f := min(cells(c.finished), barWidth)
	r := min(cells(c.running), barWidth-f)
	x := min(cells(c.failed), barWidth-f-r)
	return "[" + strings.Repeat("=", f) + strings.Repeat(">", r) + strings.Repeat("!", x) +
		strings.Repeat(".", barWidth-f-r-x) + "]"
}

// liveLines renders the in-place view of a waiting command for a terminal
// of the given size: a heading, one line per vertex with a bar and counts,
// and the job's message. Lines are cut to the width and vertices that do not
// fit the height are summed up on one line.
func liveLines(job *api.Job, elapsed time.Duration, size termSize) []string {
	head := fmt.Sprintf("Job %s: %s  restarts %d  elapsed %s", job.ID, job.Status, job.Restarts, formatElapsed(elapsed))
	lines := []string{head}

	room := len(job.Vertices)
	if size.height > 0 {
		room = max(1, size.height-3) // heading, message, cursor line
	}
	t := newTable(2)
	for i, v := range job.Vertices {
		if i == room-1 && len(job.Vertices) > room {
			var rest subtaskCounts
			for _, r := range job.Vertices[i:] {
				rest = rest.add(countSubtasks(r))
			}
			t.row(fmt.Sprintf("  (%d more)", len(job.Vertices)-i), progressBar(rest), rest.summary())
			break
		}
		c := countSubtasks(v)
		t.row("  "+v.ID, progressBar(c), c.summary())
	}
	lines = append(lines, strings.Split(strings.TrimSuffix(t.String(), "\n"), "\n")...)
	if len(job.Vertices) == 0 {
		lines = lines[:1]
	}
	if job.Message != "" {
		lines = append(lines, "  "+oneLine(job.Message))
	}
	if size.width > 0 {
		for i, l := range lines {
			lines[i] = truncate(l, size.width-1)
		}
	}
	return lines
}

// truncate cuts s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if n <= 0 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// oneLine puts a possibly multi-line message on one line.
func oneLine(s string) string {
	return printable(strings.Join(strings.Fields(s), " "))
}
