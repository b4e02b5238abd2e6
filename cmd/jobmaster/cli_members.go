package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newMembersCmd builds `jobmaster members`.
func newMembersCmd(env *cliEnv) *cobra.Command {
	o := &clientOpts{env: env}
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the masters (the leader marked) and the executors",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.newClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			cluster, err := c.Cluster(cmd.Context())
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), cluster)
			}
			fmt.Fprint(cmd.OutOrStdout(), formatMembers(cluster))
			return nil
		},
	}
	addClientFlags(cmd, o)
	return cmd
}
