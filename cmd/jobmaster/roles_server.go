package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/launch"
	"jobmaster/master"
)

// newServerCmd is `jobmaster server`: one master.
func newServerCmd() *cobra.Command {
	var o launch.Server
	cmd := &cobra.Command{
		Use:   launch.ServerCommand,
		Short: "Run a master (one of a 3- or 5-master quorum)",
		Long: `Run a master. Masters replicate jobs and deployments through Raft; the
leader schedules tasks onto executors, which it finds through gossip.

Start three with --bootstrap-expect 3 and each other's gossip addresses in
--join; they form a cluster once all three see each other. A master restarted
on its data dir rejoins its cluster without bootstrapping.

Beyond loopback a master needs TLS (--tls-ca, --tls-cert, --tls-key), a
gossip key and --acl, or --insecure (docs/security.md). SIGHUP rereads the
certificates and the --gossip-keyring file.`,
		Example: `  jobmaster server --node-id m1 --data-dir /var/lib/jobmaster/m1 \
    --http-addr 10.0.0.1:7401 --raft-addr 10.0.0.1:7411 --gossip-addr 10.0.0.1:7421 \
    --join 10.0.0.1:7421,10.0.0.2:7421,10.0.0.3:7421 --bootstrap-expect 3`,
		Args: groupArgs, // none: a word after it is an unknown command
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "node-id", "data-dir"); err != nil {
				return err
			}
			if err := checkNodeID(cmd, o.NodeID); err != nil {
				return err
			}
			if err := o.Check(); err != nil {
				return usageErrorf(cmd, "%v", err)
			}
			switch strings.ToLower(o.RaftLogLevel) {
			case "trace", "debug", "info", "warn", "error", "off":
			default:
				return usageErrorf(cmd, "--raft-log-level %q: use trace, debug, info, warn, error or off", o.RaftLogLevel)
			}
			logger, err := newLogger(cmd, o.LogLevel, o.LogFormat)
			if err != nil {
				return err
			}
			cfg := o.Config
			cfg.Logger = logger
			cfg.RaftLogJSON = strings.EqualFold(o.LogFormat, "json")
			cfg.RaftLog = cmd.ErrOrStderr()
			startProfile(os.Getenv, func(format string, args ...any) { logger.Warn(fmt.Sprintf(format, args...)) })
			m, err := master.New(cfg)
			if err != nil {
				return err
			}
			if !cfg.RaftLogJSON { // in JSON, "master started" says it, and stderr stays JSON
				fmt.Fprintf(cmd.ErrOrStderr(), "jobmaster server %s: HTTP API on %s\n", cfg.NodeID, m.HTTPAddr())
			}
			serveUntilDone(cmd.Context(), m.Halted(), m.Reload)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			err = m.Shutdown(ctx)
			if herr := m.HaltErr(); herr != nil {
				return herr
			}
			return err
		},
	}
	launch.ServerFlags(cmd.Flags(), &o)
	return cmd
}
