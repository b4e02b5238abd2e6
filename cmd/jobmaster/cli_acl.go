package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"jobmaster/acl"
	"jobmaster/api"
	"jobmaster/client"
)

// newACLCmd builds `jobmaster acl`: the bootstrap and the tokens
// (docs/security.md, "ACLs").
func newACLCmd(env *cliEnv) *cobra.Command {
	o := &clientOpts{env: env}
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Bootstrap the ACLs; create, list and delete tokens",
		Long: `Masters started with --acl answer a request only with a token whose policy
allows it: read (every read of jobs and the cluster), submit (read, and
submitting and cancelling jobs) or management (everything: the operator
endpoints and tokens too). A request carries the token's secret, which the
client commands take from --token or $JOBMASTER_TOKEN.

'acl bootstrap' creates the first management token, once per cluster.`,
		Args: groupArgs,
		RunE: runGroup,
	}
	addClientFlags(cmd, o)
	cmd.AddCommand(&cobra.Command{
		Use:   "bootstrap",
		Short: "Create the cluster's first management token (once; it is shown once)",
		Args:  exactArgs(),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			t, err := c.BootstrapACL(cmd.Context(), "")
			if err != nil {
				return err
			}
			return o.printToken(cmd, t)
		}),
	})
	tok := &cobra.Command{Use: "token", Short: "Create, list and delete tokens (a management token's commands)", Args: groupArgs, RunE: runGroup}
	var name, policy string
	create := &cobra.Command{
		Use:   "create --policy read|submit|management [--name N]",
		Short: "Create a token; its secret is shown once",
		Args:  exactArgs(),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			if policy == "" {
				return usageErrorf(cmd, "--policy is required: read, submit or management")
			}
			if _, err := acl.ParsePolicy(policy); err != nil {
				return usageErrorf(cmd, "--policy: %v", err)
			}
			t, err := c.CreateToken(cmd.Context(), api.ACLTokenRequest{Name: name, Policy: policy})
			if err != nil {
				return err
			}
			return o.printToken(cmd, t)
		}),
	}
	create.Flags().StringVar(&policy, "policy", "", "read, submit or management (required)")
	create.Flags().StringVar(&name, "name", "", "a name for the token, shown in lists and in the masters' audit log")
	tok.AddCommand(create, &cobra.Command{
		Use:   "list",
		Short: "List the tokens: accessor ids, names and policies (never secrets)",
		Args:  exactArgs(),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			ts, err := c.Tokens(cmd.Context())
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), api.ACLTokenList{Tokens: ts})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ACCESSOR ID\tNAME\tPOLICY")
			for _, t := range ts {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.AccessorID, t.Name, t.Policy)
			}
			return tw.Flush()
		}),
	}, &cobra.Command{
		Use:   "delete ACCESSOR",
		Short: "Delete a token by its accessor id",
		Args:  exactArgs("ACCESSOR"),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			if err := c.DeleteToken(cmd.Context(), args[0]); err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), api.ACLTokenDeleted{Deleted: args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deleted token %s\n", args[0])
			return nil
		}),
	})
	cmd.AddCommand(tok)
	return cmd
}

// printToken prints a new token: its document as JSON with --json, else a
// table and a reminder that the secret is shown once.
func (o *clientOpts) printToken(cmd *cobra.Command, t *api.ACLToken) error {
	if o.json {
		return printJSON(cmd.OutOrStdout(), t)
	}
	writeToken(cmd.OutOrStdout(), t)
	fmt.Fprintln(cmd.ErrOrStderr(), "Keep the secret: it is shown only this once (the masters keep its hash).")
	return nil
}

func writeToken(w io.Writer, t *api.ACLToken) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Accessor ID\t%s\n", t.AccessorID)
	fmt.Fprintf(tw, "Secret ID\t%s\n", t.SecretID)
	fmt.Fprintf(tw, "Name\t%s\n", t.Name)
	fmt.Fprintf(tw, "Policy\t%s\n", t.Policy)
	_ = tw.Flush()
}
