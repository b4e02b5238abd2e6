package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/wire"
)

// newJobLogsCmd builds `jobmaster job logs JOB VERTEX SUBTASK [--stderr] [-f]
// [--attempt N] [--via-masters]`.
func newJobLogsCmd(o *clientOpts) *cobra.Command {
	var stderr, follow, viaMasters bool
	var attempt int
	cmd := &cobra.Command{
		Use:   "logs JOB VERTEX SUBTASK | logs EXECUTION-ID",
		Short: "Print the stdout (or stderr) of a subtask's current attempt, or of an earlier one",
		Long: `Print the stdout (or, with --stderr, the stderr) of the current attempt of
one subtask, read from the executor that runs or ran it. SUBTASK is the
0-based subtask index. The output is the raw log, with or without --json.
--attempt N reads attempt N instead (the executors are asked in turn: for
the attempt before the current one, the one it ran on first; else the
current attempt's first), as long as its executor keeps it (--gc-retention).
A job id used again goes on from the attempt numbers of the job before it,
so an attempt below this job's first may be that earlier job's.

When the executor cannot be reached, or refuses this client (with TLS an
executor wants a client certificate of the cluster), the log of the current
attempt, or of the one before it, is read through the masters instead,
which relay it (GET /v1/jobs/{id}/logs): that needs a submit or management
token, and gives at most the last 16 MiB of the log (said on stderr when
the log may be longer). --via-masters reads through the masters without
asking the executor first: for a client off the executors' network.

With -f (--follow) the command prints what the task writes as it writes it,
and exits once the task has ended (waiting first, if the subtask has not
been placed yet); it says on stderr how the task ended.

An execution id as 'job status' lists it (JOB/VERTEX/SUBTASK/ATTEMPT) names
that attempt of that subtask.`,
		Example: "  jobmaster job logs wc-1 split 0\n  jobmaster job logs wc-1 count 1 --stderr\n  jobmaster job logs wc-1 report 0 -f\n  jobmaster job logs wc-1 split 0 --attempt 0   # the attempt before a restart\n  jobmaster job logs wc-1/split/0/1             # an execution id: attempt 1\n  jobmaster job logs wc-1 split 0 --via-masters # through the masters only",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return nil // an execution id, checked below
			}
			return exactArgs("JOB", "VERTEX", "SUBTASK")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				job, vertex, sub, att, ok := splitExecutionID(args[0])
				if !ok {
					return usageErrorf(cmd, "%q is no execution id (JOB/VERTEX/SUBTASK/ATTEMPT): give JOB VERTEX SUBTASK, or an id as 'job status' lists it", args[0])
				}
				if cmd.Flags().Changed("attempt") && attempt != att {
					return usageErrorf(cmd, "--attempt %d and the execution id's attempt %d differ", attempt, att)
				}
				attempt = att
				_ = cmd.Flags().Set("attempt", strconv.Itoa(att))
				args = []string{job, vertex, sub}
			}
			subtask, err := strconv.Atoi(args[2])
			if err != nil || subtask < 0 {
				return usageErrorf(cmd, "SUBTASK must be a subtask index (0, 1, ...), got %q", args[2])
			}
			stream := client.Stdout
			if stderr {
				stream = client.Stderr
			}
			lo := client.LogOptions{Stream: stream, Follow: follow, ViaMasters: viaMasters}
			if cmd.Flags().Changed("attempt") {
				if attempt < 0 {
					return usageErrorf(cmd, "--attempt must be an attempt number (0, 1, ...), got %d", attempt)
				}
				lo.Attempt = &attempt
			}
			return printLogs(cmd, o, args[0], args[1], subtask, lo)
		},
	}
	cmd.Flags().BoolVar(&stderr, "stderr", false, "print stderr instead of stdout")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "go on printing what the task writes until it ends, then exit")
	cmd.Flags().IntVar(&attempt, "attempt", 0, "read this attempt's log instead of the current one's")
	cmd.Flags().BoolVar(&viaMasters, "via-masters", false, "read the log through the masters only, never from its executor (the current attempt or the one before it; at most the last 16 MiB)")
	o.staleFlag(cmd)
	return cmd
}

// splitExecutionID splits an execution id, JOB/VERTEX/SUBTASK/ATTEMPT.
func splitExecutionID(id string) (job, vertex, subtask string, attempt int, ok bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" {
		return "", "", "", 0, false
	}
	if n, err := strconv.Atoi(parts[2]); err != nil || n < 0 {
		return "", "", "", 0, false
	}
	a, err := strconv.Atoi(parts[3])
	if err != nil || a < 0 {
		return "", "", "", 0, false
	}
	return parts[0], parts[1], parts[2], a, true
}

// placedPoll is how often logs -f asks whether a subtask has been placed.
const placedPoll = 500 * time.Millisecond

// printLogs copies one log stream of a subtask to stdout.
func printLogs(cmd *cobra.Command, o *clientOpts, job, vertex string, subtask int, lo client.LogOptions) error {
	c, err := o.newClient(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	// The current attempt asked by its number is followed as the current
	// one: waited for if not placed yet, its end said. Its number stays
	// asked: a restart meanwhile does not turn it into the next attempt.
	current := lo.Attempt == nil
	if !current {
		if j, err := c.Job(ctx, job); err == nil {
			if st, err := client.FindSubtask(j, vertex, subtask); err == nil && st.Attempt == *lo.Attempt {
				current = true
			}
		}
	}
	if lo.Follow && current {
		if err := waitPlaced(ctx, c, job, vertex, subtask); err != nil {
			return err
		}
	}
	logs, err := c.LogsOf(ctx, job, vertex, subtask, lo)
	if _, both := errors.AsType[*client.LogReadError](err); both {
		return err // the executor's failure, then the masters'
	}
	if apiErr, ok := errors.AsType[*client.APIError](err); ok && apiErr.StatusCode == http.StatusNotFound && apiErr.Message != "" {
		return errors.New(apiErr.Message) // like 'job status': the message says what is missing
	}
	if err != nil {
		return err
	}
	defer logs.Close()
	if _, err := io.Copy(cmd.OutOrStdout(), logs); err != nil {
		if ctx.Err() != nil {
			return &exitError{code: exitInterrupted}
		}
		return fmt.Errorf("read the logs of %s[%d]: %w", vertex, subtask, err)
	}
	if logs.MayLackStart {
		fmt.Fprintln(cmd.ErrOrStderr(), lackedStartLine(logs))
	}
	if lo.Follow && current {
		if st := recordedEnd(ctx, c, job, vertex, subtask); st != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), endedLine(vertex, st))
		}
	}
	return nil
}

// lackedStartLine says that a log read through a master may lack its start.
func lackedStartLine(l *client.Log) string {
	on := "its executor"
	if l.Executor != "" {
		on = "executor " + l.Executor
	}
	return fmt.Sprintf("Note: the masters relay at most the last %d MiB of a log: this is the end of the log of %s, which may begin earlier (the whole log is on %s)",
		api.LogTailMax>>20, l.ExecutionID, on)
}

// recordedEnd reads the subtask until the masters have recorded the end of
// the attempt whose log ended (its executor's report of it may still be on
// its way), for a few seconds at most.
func recordedEnd(ctx context.Context, c *client.Client, job, vertex string, subtask int) *api.Subtask {
	var st *api.Subtask
	for deadline := time.Now().Add(5 * time.Second); ; {
		j, err := c.Job(ctx, job)
		if err != nil {
			return st
		}
		if st, err = client.FindSubtask(j, vertex, subtask); err != nil {
			return nil
		}
		if st.State.Terminal() || st.State == wire.StateScheduled || time.Now().After(deadline) {
			return st
		}
		if sleepCtx(ctx, 100*time.Millisecond) != nil {
			return st
		}
	}
}

// endedLine says how a followed subtask's attempt ended.
func endedLine(vertex string, st *api.Subtask) string {
	line := fmt.Sprintf("%s/%d attempt %d ended %s", vertex, st.Index, st.Attempt, st.State)
	if !st.State.Terminal() {
		// A restart may already have replaced the attempt followed.
		line = fmt.Sprintf("%s/%d attempt %d is %s", vertex, st.Index, st.Attempt, st.State)
	}
	if st.Message != "" {
		line += ": " + oneLine(st.Message)
	}
	return line
}

// waitPlaced waits until the current attempt of the subtask has been
// placed on an executor.
func waitPlaced(ctx context.Context, c *client.Client, job, vertex string, subtask int) error {
	for {
		j, err := c.Job(ctx, job)
		if err != nil {
			return notFound(err, job)
		}
		st, err := client.FindSubtask(j, vertex, subtask)
		if err != nil {
			return err
		}
		if st.Executor != "" && st.ExecutionID != "" {
			return nil
		}
		if terminalStatus(j.Status) {
			return fmt.Errorf("subtask %s[%d] of job %q never ran: the job ended %s", vertex, subtask, job, j.Status)
		}
		if err := sleepCtx(ctx, placedPoll); err != nil {
			return &exitError{code: exitInterrupted}
		}
	}
}
