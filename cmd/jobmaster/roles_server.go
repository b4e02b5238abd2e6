package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/master"
)

// newServerCmd is `jobmaster server`: one master.
func newServerCmd() *cobra.Command {
	var cfg master.Config
	var join, logLevel string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a master (one of a 3- or 5-master quorum)",
		Long: `Run a master. Masters replicate jobs and deployments through Raft; the
leader schedules tasks onto executors, which it finds through gossip.

Start three with --bootstrap-expect 3 and each other's gossip addresses in
--join; they form a cluster once all three see each other. A master restarted
on its data dir rejoins its cluster without bootstrapping.`,
		Example: `  jobmaster server --node-id m1 --data-dir /var/lib/jobmaster/m1 \
    --http-addr 10.0.0.1:7401 --raft-addr 10.0.0.1:7411 --gossip-addr 10.0.0.1:7421 \
    --join 10.0.0.1:7421,10.0.0.2:7421,10.0.0.3:7421 --bootstrap-expect 3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "node-id", "data-dir"); err != nil {
				return err
			}
			if err := checkNodeID(cmd, cfg.NodeID); err != nil {
				return err
			}
			switch strings.ToLower(cfg.RaftLogLevel) {
			case "trace", "debug", "info", "warn", "error", "off":
			default:
				return usageErrorf(cmd, "--raft-log-level %q: use trace, debug, info, warn, error or off", cfg.RaftLogLevel)
			}
			cfg.Join = splitList(join)
			logger, err := newLogger(cmd, logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			m, err := master.New(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "jobmaster server %s: HTTP API on %s\n", cfg.NodeID, m.HTTPAddr())
			<-cmd.Context().Done()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			return m.Shutdown(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.NodeID, "node-id", "", "unique name of this master (required)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for the Raft log, snapshots and state (required)")
	f.StringVar(&cfg.HTTPAddr, "http-addr", "127.0.0.1:7401", "host:port of the HTTP API")
	f.StringVar(&cfg.RaftAddr, "raft-addr", "127.0.0.1:7411", "host:port for Raft traffic between masters")
	f.StringVar(&cfg.GossipAddr, "gossip-addr", "127.0.0.1:7421", "host:port for gossip (TCP and UDP)")
	f.StringVar(&join, "join", "", "comma-separated gossip addresses of other masters")
	f.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many masters are seen (0: only join an existing one)")
	f.DurationVar(&cfg.RaftHeartbeatTimeout, "raft-heartbeat-timeout", master.DefaultRaftTimeout, "Raft heartbeat timeout")
	f.DurationVar(&cfg.RaftElectionTimeout, "raft-election-timeout", master.DefaultRaftTimeout, "Raft election timeout")
	f.DurationVar(&cfg.ExecutorHeartbeat, "executor-heartbeat", master.DefaultExecutorHeartbeat, "interval of the leader's heartbeats to each executor")
	f.DurationVar(&cfg.ExecutorTimeout, "executor-timeout", master.DefaultExecutorTimeout, "silence after which an executor is lost and its executions are failed")
	f.DurationVar(&cfg.ExecutorLease, "executor-lease", master.DefaultExecutorLease, "the executors' --lease (checked against --executor-timeout)")
	f.DurationVar(&cfg.DeployTimeout, "deploy-timeout", master.DefaultDeployTimeout, "how long a deployment may stay unacknowledged before it fails")
	f.DurationVar(&cfg.JobRetention, "job-retention", master.DefaultJobRetention, "forget a job this long after it ended (0: keep ended jobs forever)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&cfg.RaftLogLevel, "raft-log-level", "warn", "log level of the Raft library")
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
