package main

import (
	"crypto/rand"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/pki"
)

// tlsWritten is what the tls commands print with --json.
type tlsWritten struct {
	Identity string   `json:"identity,omitempty"` // jobmaster://<role>/<node id>; empty for a CA
	Cert     string   `json:"cert"`
	Key      string   `json:"key"`
	NotAfter string   `json:"not_after"`
	Names    []string `json:"names,omitempty"`
}

// newTLSCmd is `jobmaster tls`: the cluster's small CA (docs/security.md).
func newTLSCmd() *cobra.Command {
	var tlsJSON bool
	newTLSCACreateCmd := func() *cobra.Command { return newTLSCACreate(&tlsJSON) }
	newTLSCertCreateCmd := func() *cobra.Command { return newTLSCertCreate(&tlsJSON) }
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Create a CA and the certificates of masters, executors and clients",
		Long: `Create the certificates a cluster with TLS needs: one CA, a server certificate
per master, an executor certificate per executor, and client certificates for
people or tools that want one. Each certificate carries its role and node id
(as the URI jobmaster://<role>/<node id>), which the nodes check: only a
server may join Raft or command an executor, only an executor may push its
own state or fetch partitions.`,
		Args: groupArgs,
		RunE: runGroup,
	}
	cmd.PersistentFlags().BoolVar(&tlsJSON, "json", false, "print what was written as JSON")
	ca := &cobra.Command{Use: "ca", Short: "Create the cluster's certificate authority", Args: groupArgs, RunE: runGroup}
	ca.AddCommand(newTLSCACreateCmd())
	cert := &cobra.Command{Use: "cert", Short: "Issue certificates from the CA", Args: groupArgs, RunE: runGroup}
	cert.AddCommand(newTLSCertCreateCmd())
	cmd.AddCommand(ca, cert)
	return cmd
}

func newTLSCACreate(asJSON *bool) *cobra.Command {
	var dir string
	var days int
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a CA: DIR/ca.pem and DIR/ca-key.pem",
		Long: `Create a certificate authority in --dir: ca.pem, the certificate every node
trusts (--tls-ca) and clients verify the masters with (--ca-cert), and
ca-key.pem, its private key (mode 0600), which issues every certificate:
keep it off the cluster's hosts. Existing files are never overwritten.`,
		Example: `  jobmaster tls ca create --dir /etc/jobmaster/tls`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if days < 1 {
				return usageErrorf(cmd, "--days must be positive, got %d", days)
			}
			ca, err := pki.NewCA(rand.Reader, time.Now(), time.Duration(days)*24*time.Hour)
			if err != nil {
				return err
			}
			certPath, keyPath, err := pki.WriteCA(dir, ca)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if *asJSON {
				return printJSON(out, tlsWritten{Cert: certPath, Key: keyPath, NotAfter: ca.Cert.NotAfter.UTC().Format(time.RFC3339)})
			}
			fmt.Fprintf(out, "Created %s, valid until %s\n", ca.Cert.Subject.CommonName, ca.Cert.NotAfter.UTC().Format(time.DateOnly))
			fmt.Fprintf(out, "  certificate: %s (every node's --tls-ca, clients' --ca-cert)\n", certPath)
			fmt.Fprintf(out, "  key:         %s (keep it secret, and off the cluster's hosts)\n", keyPath)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory to write ca.pem and ca-key.pem into (created if missing)")
	cmd.Flags().IntVar(&days, "days", int(pki.DefaultCAValidity/(24*time.Hour)), "days the CA is valid")
	return cmd
}

func newTLSCertCreate(asJSON *bool) *cobra.Command {
	var role, nodeID, caDir, dir string
	var ips, dns []string
	var days int
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Issue a certificate: DIR/<role>-<node id>.pem and its key",
		Long: `Issue a certificate from the CA in --ca for a master (--role server), an
executor (--role executor) or a client (--role client), named by --node-id
(a client's names the user or tool). It is written to --dir as
<role>-<node id>.pem with its key <role>-<node id>-key.pem (mode 0600).

Every certificate covers 127.0.0.1, ::1 and localhost. Give a node's other
addresses with --ip and its host names with --dns: the address a node
advertises (its --http-addr, --raft-addr) must be among them, since its
peers verify it.`,
		Example: `  jobmaster tls cert create --role server --node-id m1 --ca /etc/jobmaster/tls --ip 10.0.0.1
  jobmaster tls cert create --role executor --node-id e1 --ca /etc/jobmaster/tls --ip 10.0.0.4 --dns worker4.example`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "role", "node-id"); err != nil {
				return err
			}
			r, err := pki.ParseRole(role)
			if err != nil {
				return usageErrorf(cmd, "--role: %v", err)
			}
			if err := checkNodeID(cmd, nodeID); err != nil {
				return err
			}
			if days < 1 {
				return usageErrorf(cmd, "--days must be positive, got %d", days)
			}
			req := pki.Request{Identity: pki.Identity{Role: r, NodeID: nodeID}, Now: time.Now(), Validity: time.Duration(days) * 24 * time.Hour}
			for _, s := range splitFlagList(strings.Join(ips, ",")) {
				ip := net.ParseIP(s)
				if ip == nil {
					return usageErrorf(cmd, "--ip: %q is not an IP address", s)
				}
				req.IPs = append(req.IPs, ip)
			}
			req.DNS = splitFlagList(strings.Join(dns, ","))
			ca, err := pki.LoadCA(caDir)
			if err != nil {
				return fmt.Errorf("the CA in %s: %w (create one with 'jobmaster tls ca create')", caDir, err)
			}
			is, err := ca.Issue(rand.Reader, req)
			if err != nil {
				return err
			}
			certPath, keyPath, err := pki.WriteIssued(dir, is)
			if err != nil {
				return err
			}
			var names []string
			for _, ip := range is.Cert.IPAddresses {
				names = append(names, ip.String())
			}
			names = append(names, is.Cert.DNSNames...)
			out := cmd.OutOrStdout()
			if *asJSON {
				return printJSON(out, tlsWritten{Identity: is.Identity.URI().String(), Cert: certPath, Key: keyPath,
					NotAfter: is.Cert.NotAfter.UTC().Format(time.RFC3339), Names: names})
			}
			fmt.Fprintf(out, "Issued the certificate of %s (%s), valid until %s, for %s\n",
				is.Identity, is.Identity.URI(), is.Cert.NotAfter.UTC().Format(time.DateOnly), strings.Join(names, ", "))
			certFlag, keyFlag := "--tls-cert", "--tls-key"
			if is.Identity.Role == pki.Client {
				certFlag, keyFlag = "--client-cert or $"+clientCertEnv, "--client-key or $"+clientKeyEnv
			}
			fmt.Fprintf(out, "  certificate: %s (%s)\n", certPath, certFlag)
			fmt.Fprintf(out, "  key:         %s (%s)\n", keyPath, keyFlag)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&role, "role", "", "server (a master), executor or client (required)")
	f.StringVar(&nodeID, "node-id", "", "the node id of the master or executor, or a client's name (required)")
	f.StringVar(&caDir, "ca", ".", "directory holding ca.pem and ca-key.pem")
	f.StringVar(&dir, "dir", ".", "directory to write the certificate and key into (created if missing)")
	f.StringSliceVar(&ips, "ip", nil, "IP addresses the certificate covers, besides 127.0.0.1 and ::1 (comma-separated, or the flag repeated)")
	f.StringSliceVar(&dns, "dns", nil, "host names the certificate covers, besides localhost (comma-separated, or the flag repeated)")
	f.IntVar(&days, "days", int(pki.DefaultCertValidity/(24*time.Hour)), "days the certificate is valid")
	return cmd
}

// splitFlagList splits a comma-separated flag value, dropping blanks.
func splitFlagList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
