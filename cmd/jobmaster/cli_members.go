package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"jobmaster/client"
)

// newMembersCmd builds `jobmaster members`.
func newMembersCmd(env *cliEnv) *cobra.Command {
	o := &clientOpts{env: env}
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the masters (the leader marked) and the executors",
		Args:  exactArgs(),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			cluster, err := c.Cluster(cmd.Context())
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), cluster)
			}
			fmt.Fprint(cmd.OutOrStdout(), formatMembers(cluster))
			return nil
		}),
	}
	addClientFlags(cmd, o)
	o.staleFlag(cmd)
	return cmd
}
