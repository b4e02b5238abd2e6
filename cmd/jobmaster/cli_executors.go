package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/api"
	"jobmaster/client"
)

// newExecutorsCmd builds `jobmaster executors`: list executors, drain one
// and make it eligible again.
func newExecutorsCmd(env *cliEnv) *cobra.Command {
	o := &clientOpts{env: env}
	cmd := &cobra.Command{
		Use:   "executors",
		Short: "List executors; drain one, or make it eligible for work again",
		Args:  groupArgs,
		RunE:  runGroup,
	}
	addClientFlags(cmd, o)
	list := &cobra.Command{
		Use:   "list",
		Short: "List the executors: liveness, slots, and drains",
		Args:  exactArgs(),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			cluster, err := c.Cluster(cmd.Context())
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"executors": cluster.Executors}) // as GET /v1/cluster has them
			}
			fmt.Fprint(cmd.OutOrStdout(), formatExecutors(cluster.Executors))
			return nil
		}),
	}
	o.staleFlag(list)
	var deadline string
	var disable bool
	drain := &cobra.Command{
		Use:   "drain ID",
		Short: "Drain an executor: no new work; what runs moves elsewhere at the deadline",
		Long: `Drain an executor before taking its host down. From now on it gets no new
work. What runs there may finish until --deadline; then it is cancelled and
placed elsewhere, and whatever the executor holds for consumers is produced
again elsewhere, none of it counted against the jobs' restart strategies.
'executors list' shows the executor drained once it holds nothing a job
needs. --disable ends the drain: the executor is eligible for work again.`,
		Example: `  jobmaster executors drain e1 --deadline 5m
  jobmaster executors list          # wait for STATUS drained, then stop e1
  jobmaster executors drain e1 --disable`,
		Args: exactArgs("ID"),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			id := args[0]
			if strings.TrimSpace(id) == "" {
				return usageErrorf(cmd, "the executor ID is empty: 'jobmaster executors list' shows the ids")
			}
			if disable && cmd.Flags().Changed("deadline") {
				return usageErrorf(cmd, "--deadline and --disable do not go together: --disable ends the drain")
			}
			if !disable {
				if d, err := time.ParseDuration(deadline); err != nil {
					return usageErrorf(cmd, "--deadline %q: want a duration such as 30s or 5m, 0s to move the work at once", deadline)
				} else if d < 0 {
					return usageErrorf(cmd, "--deadline %q must not be negative: 0s moves the work at once", deadline)
				}
			}
			var res api.DrainResponse
			var err error
			if disable {
				res, err = c.UndrainExecutor(cmd.Context(), id)
			} else {
				res, err = c.DrainExecutor(cmd.Context(), id, deadline)
			}
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			if disable {
				fmt.Fprintf(cmd.OutOrStdout(), "Executor %s is eligible for work again\n", id)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Executor %s is draining: no new work; what still runs at %s moves elsewhere\n",
				id, time.UnixMilli(res.Deadline).UTC().Format(time.RFC3339))
			return nil
		}),
	}
	drain.Flags().StringVar(&deadline, "deadline", api.DefaultDrainDeadline, "how long what runs there may go on before it is moved elsewhere (0s: at once)")
	drain.Flags().BoolVar(&disable, "disable", false, "end the drain: the executor is eligible for work again")
	cmd.AddCommand(list, drain)
	return cmd
}
