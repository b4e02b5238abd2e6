package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/api"
	"jobmaster/jobspec"
)

// newJobRunCmd builds `jobmaster job run FILE [--id ID] [--wait]`.
func newJobRunCmd(o *clientOpts) *cobra.Command {
	var id string
	var wait bool
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Submit a job from a JSON job spec file ('-' reads stdin)",
		Long: `Submit a job from a JSON job spec file ('-' reads stdin) and print its id.

With --id the job is submitted under that id (PUT): submitting the same spec
again changes nothing, so retries are safe. Without it the masters pick an id.

With --wait the command follows the job until it ends and exits 0 only if it
FINISHED (1 if it FAILED or was CANCELED). Ctrl-C stops waiting; the job keeps
running.`,
		Example: `  jobmaster job run examples/wordcount.json
  jobmaster job run --id wc-1 --wait examples/wordcount.json
  cat examples/wordcount.json | jobmaster job run -`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("id") {
				if err := jobspec.CheckID(id); err != nil {
					return usageErrorf(cmd, "--id: %v", err)
				}
			}
			return runJob(cmd, o, args[0], id, wait)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "submit under this job id; resubmitting is then safe (default: the masters pick one)")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the job until it ends; exit 0 only if it FINISHED")
	return cmd
}

// runJob submits the spec in file and, with wait, follows the job.
func runJob(cmd *cobra.Command, o *clientOpts, file, id string, wait bool) error {
	spec, err := readSpec(cmd.InOrStdin(), file)
	if err != nil {
		return err
	}
	c, err := o.newClient(cmd)
	if err != nil {
		return err
	}
	defer c.Close()

	ctx, out := cmd.Context(), cmd.OutOrStdout()
	if id != "" {
		created, err := c.SubmitJob(ctx, id, spec)
		if err != nil {
			return fmt.Errorf("submit job %q: %w", id, err)
		}
		if !created {
			if j, err := c.Job(ctx, id); err == nil && terminalStatus(j.Status) {
				fmt.Fprintf(cmd.ErrOrStderr(), "Job %s already exists with this spec and has ended (%s): it does not run again. Its id is free for a new job once the masters forget it, --job-retention after it ended.\n", id, j.Status)
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "Job %s already exists with this spec; nothing changed.\n", id)
			}
		}
	} else if id, err = c.CreateJob(ctx, spec); err != nil {
		return fmt.Errorf("submit job: %w", err)
	}

	if !wait {
		if o.json {
			return printJSON(out, api.SubmitResponse{ID: id})
		}
		fmt.Fprintln(out, id)
		return nil
	}
	if !o.json {
		fmt.Fprintln(out, id)
	}
	parsed, _ := jobspec.Parse(spec) // for the note if it waits: nil if not parsed here
	job, elapsed, err := o.follow(cmd, c, id, parsed)
	if errors.Is(err, errStoppedWaiting) {
		fmt.Fprintf(cmd.ErrOrStderr(), "Stopped waiting; job %s keeps running.\nTo cancel it: %s\n", id, o.cancelHint(cmd, id))
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

// jobOutcome reports how a job that was waited for ended: a line on out (if
// say) when it FINISHED, else an error with the job's message. The time it
// gives is the job's own, from its submission to its end by the leader's
// clock (as job status's Duration), when the job has both: elapsed, the
// time spent waiting, is less for a job followed after it started.
func jobOutcome(out io.Writer, job *api.Job, elapsed time.Duration, say bool) error {
	if job.SubmitTime > 0 && job.EndTime >= job.SubmitTime {
		elapsed = time.Duration(job.EndTime-job.SubmitTime) * time.Millisecond
	}
	if job.Status == statusFinished {
		if say {
			fmt.Fprintf(out, "Job %s finished after %s\n", job.ID, formatTook(elapsed))
		}
		return nil
	}
	msg := fmt.Sprintf("job %s %s", job.ID, job.Status)
	switch {
	case job.Restarts == 1:
		msg += " after 1 restart"
	case job.Restarts > 1:
		msg += fmt.Sprintf(" after %d restarts", job.Restarts)
	}
	if job.Message != "" {
		msg += ": " + job.Message
	}
	return errors.New(msg)
}

// openInput opens a file the user named as input (what names it: "job
// spec", "snapshot"), saying in words why it cannot be read: missing, a
// directory, not readable.
func openInput(file, what string) (*os.File, error) {
	f, err := os.Open(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s %s: no such file", what, file)
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%s %s: not readable (permission denied)", what, file)
	case err != nil:
		return nil, fmt.Errorf("%s %s: %w", what, file, err)
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s %s is a directory: give a file", what, file)
	}
	return f, nil
}

// readSpec reads a job spec from file, or from stdin for "-".
func readSpec(stdin io.Reader, file string) ([]byte, error) {
	name, r := file, stdin
	if file != "-" {
		f, err := openInput(file, "job spec")
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	} else {
		name = "on stdin"
	}
	data, err := io.ReadAll(io.LimitReader(r, api.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read job spec %s: %w", name, err)
	}
	if len(data) > api.MaxBodyBytes {
		return nil, fmt.Errorf("job spec %s is larger than %d bytes, the most a master accepts", name, api.MaxBodyBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("job spec %s is empty", name)
	}
	return data, nil
}
