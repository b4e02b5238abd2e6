package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/api"
	"jobmaster/client"
)

// addressEnv names the environment variable with the default master
// addresses.
const addressEnv = "JOBMASTER_ADDR"

// clientOpts holds the flags every client command takes.
type clientOpts struct {
	env     *cliEnv
	address string
	json    bool
	timeout time.Duration
	// waiting is set while a command shows a job's progress: notes on
	// stderr would garble it.
	waiting bool
}

// addClientFlags registers --address, --json and --timeout on cmd and its
// subcommands.
func addClientFlags(cmd *cobra.Command, o *clientOpts) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.address, "address", "",
		"comma-separated master HTTP addresses, host:port or http://host:port\n(default $"+addressEnv+", else "+api.DefaultAddress+")")
	f.BoolVar(&o.json, "json", false, "print the API's JSON instead of tables")
	f.DurationVar(&o.timeout, "timeout", client.DefaultTimeout, "give up on a request after this long (retries and failovers included)")
}

// addresses returns the master addresses to use: --address, else
// $JOBMASTER_ADDR, else the default.
func (o *clientOpts) addresses(cmd *cobra.Command) string {
	if cmd.Flags().Changed("address") {
		return o.address
	}
	if v := o.env.getenv(addressEnv); v != "" {
		return v
	}
	return api.DefaultAddress
}

// newClient builds a client from the flags. A bad address or timeout is a
// usage error.
func (o *clientOpts) newClient(cmd *cobra.Command) (*client.Client, error) {
	if o.timeout <= 0 {
		return nil, usageErrorf(cmd, "--timeout must be positive, got %v", o.timeout)
	}
	noted := false
	note := func(err *client.UnreachableError) {
		if noted || o.waiting {
			return
		}
		noted = true
		fmt.Fprintf(cmd.ErrOrStderr(), "Still trying: %v; giving up after %v (Ctrl-C to stop now)\n", err, o.timeout)
	}
	c, err := client.New(o.addresses(cmd), client.WithTimeout(o.timeout), client.WithRetryNotify(note))
	if err != nil {
		source := "--address"
		if !cmd.Flags().Changed("address") {
			source = "$" + addressEnv
		}
		return nil, usageErrorf(cmd, "%s: %v", source, err)
	}
	return c, nil
}

// withClient adapts a command body that needs a client: it builds one from
// the flags and closes it afterwards.
func (o *clientOpts) withClient(f func(cmd *cobra.Command, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := o.newClient(cmd)
		if err != nil {
			return err
		}
		defer c.Close()
		return f(cmd, c, args)
	}
}
