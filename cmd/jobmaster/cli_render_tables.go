package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"jobmaster/api"
	"jobmaster/wire"
)

// table collects tab-separated rows and aligns them like Nomad's CLI:
// columns two spaces apart, no trailing blanks.
type table struct {
	b  strings.Builder
	tw *tabwriter.Writer
}

func newTable(padding int) *table {
	t := &table{}
	t.tw = tabwriter.NewWriter(&t.b, 0, 8, padding, ' ', 0)
	return t
}

// row adds one row of cells, each made printable.
func (t *table) row(cells ...string) {
	clean := make([]string, len(cells))
	for i, c := range cells {
		clean[i] = printable(c)
	}
	fmt.Fprintln(t.tw, strings.Join(clean, "\t"))
}

// printableLines is printable line by line: the newlines stay.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}

// printable writes the control characters of s (C0, DEL, C1: ESC and BEL
// among them) as Go escapes (\x1b), so that what the cluster holds (a job's
// name, a task's failure message, a command) can neither move the cursor
// nor retitle or clear the terminal that shows it, nor break a table's
// line.
func printable(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) { // all below U+00A0
			fmt.Fprintf(&b, "\\x%02x", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// String flushes the table and returns its text, without the blanks that
// pad an empty last cell.
func (t *table) String() string {
	_ = t.tw.Flush()
	lines := strings.SplitAfter(t.b.String(), "\n")
	for i, l := range lines {
		if strings.HasSuffix(l, "\n") {
			lines[i] = strings.TrimRight(l[:len(l)-1], " ") + "\n"
		}
	}
	return strings.Join(lines, "")
}

// keyValues renders "Key = value" lines with the "=" aligned.
func keyValues(pairs ...[2]string) string {
	t := newTable(1)
	for _, p := range pairs {
		t.row(p[0], "= "+p[1])
	}
	return t.String()
}

// orDash shows an empty cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatJobList renders `job list`.
func formatJobList(jobs []api.JobSummary) string {
	if len(jobs) == 0 {
		return "No jobs\n"
	}
	t := newTable(2)
	t.row("ID", "NAME", "STATUS")
	for _, j := range jobs {
		t.row(j.ID, orDash(j.Name), j.Status)
	}
	return t.String()
}

// formatJobStatus renders `job status`: the job, then a table per vertex.
// now gives the time zone for dates and the end of a running job's duration.
func formatJobStatus(job *api.Job, now time.Time) string {
	return formatJobStatusNoting(job, now, nil)
}

// formatJobStatusNoting is formatJobStatus with a note for the live
// subtasks of some executors (silentNotes: one the leader has not heard
// from for a while).
func formatJobStatusNoting(job *api.Job, now time.Time, notes map[string]string) string {
	return formatJobStatusAs(job, now, notes, false)
}

// formatJobStatusAs is formatJobStatusNoting; short leaves out the
// subtasks, a line per vertex saying how many are in each state.
func formatJobStatusAs(job *api.Job, now time.Time, notes map[string]string, short bool) string {
	pairs := [][2]string{
		{"ID", job.ID},
		{"Name", orDash(job.Name)},
		{"Status", job.Status},
		{"Restarts", strconv.Itoa(job.Restarts)},
	}
	if job.SubmitTime > 0 {
		submitted := time.UnixMilli(job.SubmitTime).In(now.Location())
		end := now
		if job.EndTime > 0 {
			end = time.UnixMilli(job.EndTime)
		}
		pairs = append(pairs,
			[2]string{"Submitted", submitted.Format(time.RFC3339)},
			[2]string{"Duration", formatTook(end.Sub(submitted))})
	}
	if job.Message != "" {
		label := "Message"
		if job.Status == statusFinished {
			label = "Last restart" // a finished job's message is why it last restarted
		}
		pairs = append(pairs, [2]string{label, oneLine(job.Message)})
	}
	var b strings.Builder
	b.WriteString(keyValues(pairs...))
	if short && len(job.Vertices) > 0 {
		b.WriteString("\n")
	}
	for _, v := range job.Vertices {
		if short {
			b.WriteString(formatVertexHead(v))
			continue
		}
		b.WriteString("\n")
		b.WriteString(formatVertex(v, notes))
	}
	return b.String()
}

// formatVertexHead is a vertex's first line: its parallelism and how many
// of its subtasks are in each state.
func formatVertexHead(v api.Vertex) string {
	c := countSubtasks(v)
	return fmt.Sprintf("Vertex %q (parallelism %d): %s\n", v.ID, c.total, c.summary())
}

// silentNotes notes the executors the leader has not heard from for two
// seconds or more: their subtasks may be gone though still shown live,
// until the executor timeout declares them lost.
func silentNotes(cl *api.Cluster) map[string]string {
	notes := map[string]string{}
	for _, x := range cl.Executors {
		switch {
		case x.SilentMs != nil && *x.SilentMs >= 2000:
			notes[x.ID] = fmt.Sprintf("executor not heard for %s", (time.Duration(*x.SilentMs) * time.Millisecond).Truncate(time.Second))
		case x.SilentMs == nil && x.Status == "lost":
			notes[x.ID] = "executor gone from gossip"
		}
	}
	return notes
}

// previousAttempt renders how a restarted subtask's previous attempt ended.
func previousAttempt(s api.Subtask) string {
	p := s.PreviousAttempt
	if p == nil {
		return ""
	}
	out := fmt.Sprintf("attempt %d %s", p.Attempt, p.State)
	if p.Message != "" {
		out += ": " + oneLine(p.Message)
	}
	return out
}

// formatVertex renders one vertex of `job status`: a heading with counts,
// then one row per subtask.
func formatVertex(v api.Vertex, notes map[string]string) string {
	var b strings.Builder
	b.WriteString(formatVertexHead(v))
	message := func(s api.Subtask) string {
		if s.Message == "" && !s.State.Terminal() && s.State != wire.StateScheduled {
			return notes[s.Executor]
		}
		return oneLine(s.Message)
	}
	withMessage, withPrevious := false, false
	for _, s := range v.Subtasks {
		withMessage = withMessage || message(s) != ""
		withPrevious = withPrevious || s.PreviousAttempt != nil
	}
	t := newTable(2)
	header := []string{"INDEX", "STATE", "ATTEMPT", "EXECUTOR", "EXECUTION ID"}
	if withMessage {
		header = append(header, "MESSAGE")
	}
	if withPrevious {
		header = append(header, "PREVIOUS ATTEMPT")
	}
	t.row(header...)
	for _, s := range v.Subtasks {
		cells := []string{strconv.Itoa(s.Index), string(s.State), strconv.Itoa(s.Attempt), orDash(s.Executor), orDash(s.ExecutionID)}
		if withMessage {
			cells = append(cells, message(s))
		}
		if withPrevious {
			cells = append(cells, previousAttempt(s))
		}
		t.row(cells...)
	}
	b.WriteString(t.String())
	return b.String()
}

// formatMembers renders `members`: the leader and fencing token, the
// masters (the leader marked) and the executors.
func formatMembers(c *api.Cluster) string {
	leader := "none (no leader elected)"
	if c.Leader != nil {
		leader = *c.Leader
	}
	var b strings.Builder
	b.WriteString(keyValues(
		[2]string{"Leader", leader},
		[2]string{"Fencing token", strconv.FormatUint(c.FencingToken, 10)},
		[2]string{"Cluster", orDash(c.ClusterID)},
	))

	b.WriteString("\nMasters\n")
	if len(c.Masters) == 0 {
		b.WriteString("No masters\n")
	} else {
		t := newTable(2)
		t.row("ID", "HTTP ADDR", "ROLE", "STATUS", "LEADER")
		for _, m := range c.Masters {
			isLeader := c.Leader != nil && *c.Leader == m.ID
			t.row(m.ID, orDash(m.HTTPAddr), orDash(m.Role), orDash(m.Status), strconv.FormatBool(isLeader))
		}
		b.WriteString(t.String())
	}

	b.WriteString("\nExecutors\n")
	b.WriteString(formatExecutors(c.Executors))
	return b.String()
}

// formatExecutors renders the executors of `members` and `executors
// list`: liveness (or drained), a full disk (which keeps new work away)
// or a storage error (--json has what failed), whether each drains and
// until when, and, when some executor offers CPU or memory to tasks that
// declare them, what of it is free.
func formatExecutors(xs []api.Executor) string {
	if len(xs) == 0 {
		return "No executors\n"
	}
	resources := slices.ContainsFunc(xs, func(e api.Executor) bool { return e.CPUMillis > 0 || e.MemoryMB > 0 })
	t := newTable(2)
	head := []string{"ID", "HTTP ADDR", "SLOTS", "FREE SLOTS", "STATUS", "DRAINING", "DRAIN DEADLINE"}
	if resources {
		head = append(head, "FREE CPU", "FREE MEMORY")
	}
	t.row(head...)
	for _, e := range xs {
		deadline := "-"
		if e.Draining && e.DrainDeadline > 0 {
			deadline = time.UnixMilli(e.DrainDeadline).UTC().Format(time.RFC3339)
		}
		status := e.Status
		if e.DiskFull {
			status += ", disk full" // nothing new is placed there
		}
		if e.StorageError != "" {
			status += ", storage error"
		}
		row := []string{e.ID, orDash(e.HTTPAddr), strconv.Itoa(e.Slots), strconv.Itoa(e.FreeSlots), status, strconv.FormatBool(e.Draining), deadline}
		if resources {
			row = append(row, freeOf(e.FreeCPUMillis, e.CPUMillis, "m"), freeOf(e.FreeMemoryMB, e.MemoryMB, " MiB"))
		}
		t.row(row...)
	}
	return t.String()
}

// freeOf is "free/total<unit>" of a resource an executor offers, "-" when
// it offers none (or its use is not known).
func freeOf(free *int64, total int64, unit string) string {
	if total <= 0 || free == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d%s", *free, total, unit)
}
