package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// newJobCancelCmd builds `jobmaster job cancel ID [--wait]`.
func newJobCancelCmd(o *clientOpts) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a job",
		Long: `Cancel a job: its running subtasks are stopped and it ends CANCELED.

With --wait the command follows the job until it ends and exits 0 only if it
ended CANCELED (1 if it FINISHED or FAILED first).`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cancelJob(cmd, o, args[0], wait)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the job has ended")
	return cmd
}

// cancelJob asks for the job to be canceled and, with wait, follows it.
func cancelJob(cmd *cobra.Command, o *clientOpts, id string, wait bool) error {
	c, err := o.newClient(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	res, err := c.CancelJobStatus(ctx, id)
	if err != nil {
		return fmt.Errorf("cancel job %q: %w", id, notFound(err, id))
	}
	if res.Unchanged && terminalStatus(res.Status) {
		// Nothing to cancel, and nothing to wait for.
		if o.json {
			return printJSON(out, res)
		}
		fmt.Fprintf(out, "Job %s had already ended %s: nothing to cancel\n", id, res.Status)
		if wait && res.Status != statusCanceled {
			return &exitError{code: exitFailure}
		}
		return nil
	}
	if res.Unchanged && !wait {
		if o.json {
			return printJSON(out, res)
		}
		fmt.Fprintf(out, "Job %s is already %s; the cancel changes nothing\n", id, res.Status)
		return nil
	}
	if !wait {
		if o.json {
			return printJSON(out, res)
		}
		fmt.Fprintf(out, "Cancel requested for job %s\n", id)
		return nil
	}
	if !o.json {
		fmt.Fprintf(out, "Cancel requested for job %s; waiting for it to end\n", id)
	}
	job, _, err := o.follow(cmd, c, id, nil)
	if errors.Is(err, errStoppedWaiting) {
		fmt.Fprintf(cmd.ErrOrStderr(), "Stopped waiting; job %s is still being canceled.\n", id)
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
	if job.Status != statusCanceled {
		return fmt.Errorf("job %s ended %s before the cancel took effect", id, job.Status)
	}
	if !o.json {
		fmt.Fprintf(out, "Job %s canceled\n", id)
	}
	return nil
}
