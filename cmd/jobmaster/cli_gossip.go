package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"jobmaster/membership"
)

// newGossipCmd is `jobmaster operator gossip`: gossip encryption keys.
func newGossipCmd(o *clientOpts) *cobra.Command {
	cmd := &cobra.Command{Use: "gossip", Short: "Make gossip encryption keys", Args: groupArgs, RunE: runGroup}
	cmd.AddCommand(&cobra.Command{
		Use:   "keygen",
		Short: "Print a fresh gossip encryption key",
		Long: `Print a fresh gossip encryption key: 32 random bytes, base64-encoded, for
--gossip-key or a line of a --gossip-keyring file. Every node of a cluster
needs a key the others have; docs/security.md tells how to rotate it.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := membership.NewKey()
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), map[string]string{"key": k})
			}
			fmt.Fprintln(cmd.OutOrStdout(), k)
			return nil
		},
	})
	return cmd
}
