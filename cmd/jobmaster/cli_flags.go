package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/api"
	"jobmaster/client"
	"jobmaster/transport"
)

// Environment variables of the client commands: the default master
// addresses, the CA to verify them with, and a client certificate.
const (
	addressEnv    = "JOBMASTER_ADDR"
	caCertEnv     = "JOBMASTER_CACERT"
	clientCertEnv = "JOBMASTER_CLIENT_CERT"
	clientKeyEnv  = "JOBMASTER_CLIENT_KEY"
	tokenEnv      = "JOBMASTER_TOKEN"
)

// clientOpts holds the flags every client command takes.
type clientOpts struct {
	env     *cliEnv
	address string
	json    bool
	timeout time.Duration
	// caCert, clientCert and clientKey are --ca-cert, --client-cert and
	// --client-key.
	caCert, clientCert, clientKey string
	// token is --token, the ACL token's secret.
	token string
	// waiting is set while a command shows a job's progress: notes on
	// stderr would garble it.
	waiting bool
	// stale is --stale, on the commands that only read.
	stale bool
}

// staleFlag registers --stale on a command that only reads.
func (o *clientOpts) staleFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.stale, "stale", false, "let any master answer from its own copy of the state, without a leader (works while most masters are down; may be behind)")
}

// addClientFlags registers --address, --json, --timeout, --token and the
// TLS flags on cmd and its subcommands.
func addClientFlags(cmd *cobra.Command, o *clientOpts) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.address, "address", "",
		"comma-separated master HTTP addresses, host:port, http://host:port or https://host:port\n(default $"+addressEnv+", else "+api.DefaultAddress+")")
	f.StringVar(&o.caCert, "ca-cert", "", "PEM file of the CA that signed the masters' certificates: host:port then means https\n(default $"+caCertEnv+", else the CA of a 'jobmaster dev' on its default ports)")
	f.StringVar(&o.clientCert, "client-cert", "", "PEM file of a client certificate to present (default $"+clientCertEnv+")")
	f.StringVar(&o.clientKey, "client-key", "", "PEM file of the client certificate's key (default $"+clientKeyEnv+")")
	f.StringVar(&o.token, "token", "", "ACL token secret to send with every request (default $"+tokenEnv+", else the token of a 'jobmaster dev' on its default ports;\nthe process list shows flags: prefer the variable)")
	f.BoolVar(&o.json, "json", false, "print the API's JSON instead of tables")
	f.DurationVar(&o.timeout, "timeout", client.DefaultTimeout, "give up on a request after this long (retries and failovers included); left out, also once every master has refused the connection for 3s")
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

// flagOrEnv is the value of flag name, else of the environment variable.
func (o *clientOpts) flagOrEnv(cmd *cobra.Command, name, value, env string) string {
	if cmd.Flags().Changed(name) {
		return value
	}
	return o.env.getenv(env)
}

// tlsOptions are the client's TLS options and ACL token: --ca-cert,
// --client-cert, --client-key and --token or their variables; else, for
// the default addresses (or some of them), the credentials a running
// `jobmaster dev` left
// (devCredentials). The dev's token is used only with its CA, so that its
// secret goes to no other cluster.
func (o *clientOpts) tlsOptions(cmd *cobra.Command, addresses string) ([]client.Option, error) {
	token := o.flagOrEnv(cmd, "token", o.token, tokenEnv)
	ca := o.flagOrEnv(cmd, "ca-cert", o.caCert, caCertEnv)
	cert := o.flagOrEnv(cmd, "client-cert", o.clientCert, clientCertEnv)
	key := o.flagOrEnv(cmd, "client-key", o.clientKey, clientKeyEnv)
	if (cert == "") != (key == "") {
		return nil, usageErrorf(cmd, "--client-cert and --client-key go together")
	}
	var opts []client.Option
	if ca == "" && cert == "" && devAddresses(addresses) {
		if d, ok := findDevCredentials(o.env.getenv); ok {
			ca, cert, key = d.ca, d.cert, d.key
			if token == "" {
				token = d.readToken()
			}
		}
	}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	if ca == "" && cert == "" {
		return opts, nil
	}
	// Read them now, so that a file that cannot be used is reported as
	// such (client.New would report it as an address error).
	if _, err := transport.LoadTLS(transport.TLSFiles{CA: ca, Cert: cert, Key: key}); err != nil {
		return nil, fmt.Errorf("client TLS: %w", err)
	}
	if ca != "" {
		opts = append(opts, client.WithCACert(ca))
	}
	if cert != "" {
		opts = append(opts, client.WithClientCert(cert, key))
	}
	return opts, nil
}

// refusedGiveUp: a command gives up once every master has refused its
// connection this long (no master runs at the addresses given), rather
// than waiting out the default --timeout; a master that restarts listens
// within it. An explicit --timeout is waited out.
const refusedGiveUp = 3 * time.Second

// devAddresses reports whether addresses are all among the default ones,
// those of `jobmaster dev`'s masters (host:port or https://host:port):
// naming one of its masters is using the dev.
func devAddresses(addresses string) bool {
	dev := strings.Split(api.DefaultAddress, ",")
	for _, a := range strings.Split(addresses, ",") {
		a = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(a), "https://"), "/")
		if !slices.Contains(dev, a) {
			return false
		}
	}
	return true
}

// newClient builds a client from the flags. A bad address or timeout is a
// usage error.
func (o *clientOpts) newClient(cmd *cobra.Command) (*client.Client, error) {
	if o.timeout <= 0 {
		return nil, usageErrorf(cmd, "--timeout must be positive, got %v", o.timeout)
	}
	addresses := o.addresses(cmd)
	tlsOpts, err := o.tlsOptions(cmd, addresses)
	if err != nil {
		return nil, err
	}
	// An explicit --timeout is waited out whatever the masters answer (a
	// script that starts them, or waits out a restart of all of them).
	giveUp := refusedGiveUp
	if cmd.Flags().Changed("timeout") {
		giveUp = 0
	}
	noted := false
	note := func(err *client.UnreachableError) {
		if noted || o.waiting {
			return
		}
		noted = true
		if err.Refused() && giveUp > 0 && giveUp < o.timeout {
			fmt.Fprintf(cmd.ErrOrStderr(), "Still trying: %s; giving up after %v if no master listens by then (Ctrl-C to stop now)\n", message(err), giveUp)
			return
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Still trying: %s; giving up after %v (Ctrl-C to stop now)\n", message(err), o.timeout)
	}
	opts := append(tlsOpts, client.WithTimeout(o.timeout), client.WithRetryNotify(note), client.WithGiveUpWhenRefused(giveUp))
	if o.stale {
		opts = append(opts, client.WithStaleReads())
	}
	c, err := client.New(addresses, opts...)
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
