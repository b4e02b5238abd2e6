package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"jobmaster/client"

	"jobmaster/api"
)

// newJobListCmd builds `jobmaster job list`.
func newJobListCmd(o *clientOpts) *cobra.Command {
	var filter client.JobFilter
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs",
		Args:  exactArgs(),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			jobs, err := c.JobsWhere(cmd.Context(), filter)
			if err != nil {
				return err
			}
			if o.json {
				if jobs == nil {
					jobs = []api.JobSummary{}
				}
				return printJSON(cmd.OutOrStdout(), api.JobList{Jobs: jobs})
			}
			fmt.Fprint(cmd.OutOrStdout(), formatJobList(jobs))
			return nil
		}),
	}
	o.staleFlag(cmd)
	cmd.Flags().StringSliceVar(&filter.Statuses, "status", nil, "only jobs of these statuses (comma separated: RUNNING,FAILED)")
	cmd.Flags().StringVar(&filter.Prefix, "prefix", "", "only jobs whose id starts with this")
	return cmd
}
