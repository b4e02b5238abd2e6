package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"jobmaster/buildinfo"
	"jobmaster/fsm"
	"jobmaster/wire"
)

// thisBuild is this binary's build, with the versions it shares with other
// nodes.
func thisBuild() buildinfo.Info {
	return buildinfo.Read(wire.Version, fsm.SnapshotFormat, int(fsm.LastCommandType))
}

// newVersionCmd: `jobmaster version` (also `jobmaster --version`).
func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's build: revision, Go version, wire protocol, snapshot format",
		Long: `Print which build this binary is: the commit it was built from, its Go
version, and the versions of what it shares with other nodes: the wire
protocol between masters and executors, the snapshot format and the
replicated command types (docs/operations.md, Upgrades).`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := thisBuild()
			if asJSON {
				return printJSON(cmd.OutOrStdout(), b)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), b)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the build as JSON")
	return cmd
}
