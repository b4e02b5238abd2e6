package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"

	"jobmaster/client"
)

// newJobLogsCmd builds `jobmaster job logs JOB VERTEX SUBTASK [--stderr]`.
func newJobLogsCmd(o *clientOpts) *cobra.Command {
	var stderr bool
	cmd := &cobra.Command{
		Use:   "logs JOB VERTEX SUBTASK",
		Short: "Print the stdout (or stderr) of a subtask's current attempt",
		Long: `Print the stdout (or, with --stderr, the stderr) of the current attempt of
one subtask, read from the executor that runs or ran it. SUBTASK is the
0-based subtask index. The output is the raw log, with or without --json.`,
		Example: "  jobmaster job logs wc-1 split 0\n  jobmaster job logs wc-1 count 1 --stderr",
		Args:    exactArgs("JOB", "VERTEX", "SUBTASK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			subtask, err := strconv.Atoi(args[2])
			if err != nil || subtask < 0 {
				return usageErrorf(cmd, "SUBTASK must be a subtask index (0, 1, ...), got %q", args[2])
			}
			stream := client.Stdout
			if stderr {
				stream = client.Stderr
			}
			return printLogs(cmd, o, args[0], args[1], subtask, stream)
		},
	}
	cmd.Flags().BoolVar(&stderr, "stderr", false, "print stderr instead of stdout")
	return cmd
}

// printLogs copies one log stream of a subtask to stdout.
func printLogs(cmd *cobra.Command, o *clientOpts, job, vertex string, subtask int, stream string) error {
	c, err := o.newClient(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	logs, err := c.Logs(cmd.Context(), job, vertex, subtask, stream)
	if apiErr, ok := errors.AsType[*client.APIError](err); ok && apiErr.StatusCode == http.StatusNotFound && apiErr.Message != "" {
		return errors.New(apiErr.Message) // like 'job status': the message says what is missing
	}
	if err != nil {
		return err
	}
	defer logs.Close()
	if _, err := io.Copy(cmd.OutOrStdout(), logs); err != nil {
		return fmt.Errorf("read the logs of %s[%d]: %w", vertex, subtask, err)
	}
	return nil
}
