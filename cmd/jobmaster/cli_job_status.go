package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/client"
)

// newJobStatusCmd builds `jobmaster job status ID`.
func newJobStatusCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "status ID",
		Short: "Show a job and the current attempt of each of its subtasks",
		Args:  exactArgs("ID"),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			job, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return notFound(err, args[0])
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), job)
			}
			fmt.Fprint(cmd.OutOrStdout(), formatJobStatus(job, time.Now()))
			return nil
		}),
	}
}
