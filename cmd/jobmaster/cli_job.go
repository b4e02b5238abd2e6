package main

import "github.com/spf13/cobra"

// newJobCmd builds `jobmaster job` and its subcommands.
func newJobCmd(env *cliEnv) *cobra.Command {
	o := &clientOpts{env: env}
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Submit, inspect and cancel jobs",
		Args:  groupArgs,
		RunE:  runGroup,
	}
	addClientFlags(cmd, o)
	cmd.AddCommand(
		newJobRunCmd(o),
		newJobStatusCmd(o),
		newJobListCmd(o),
		newJobCancelCmd(o),
		newJobLogsCmd(o),
	)
	return cmd
}
