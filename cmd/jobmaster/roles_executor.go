package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/executor"
)

// newExecutorCmd is `jobmaster executor`: one executor.
func newExecutorCmd() *cobra.Command {
	var cfg executor.Config
	var join, logLevel string
	cmd := &cobra.Command{
		Use:   "executor",
		Short: "Run an executor that runs tasks for the leader",
		Long: `Run an executor. It joins the masters' gossip with its slot count; the
leader finds it there, heartbeats it and deploys tasks onto its slots. Each
task is a process in its own process group, in a working directory under
--data-dir with its stdout and stderr captured there.

The executor obeys only the newest leader it has heard from (fencing), and
has every task dead within --lease of the last heartbeat from a leader
(self-fencing): it starts stopping them --cancel-grace (+0.5s) before the
lease runs out. Keep --lease equal to the masters' --executor-lease, which
they check against their --executor-timeout.`,
		Example: `  jobmaster executor --node-id e1 --data-dir /var/lib/jobmaster/e1 \
    --http-addr 10.0.0.4:7431 --gossip-addr 10.0.0.4:7441 \
    --join 10.0.0.1:7421,10.0.0.2:7421,10.0.0.3:7421 --slots 8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "node-id", "data-dir"); err != nil {
				return err
			}
			if err := checkNodeID(cmd, cfg.NodeID); err != nil {
				return err
			}
			cfg.Join = splitList(join)
			if len(cfg.Join) == 0 {
				return usageErrorf(cmd, "--join is required: the gossip addresses of the masters")
			}
			logger, err := newLogger(cmd, logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			e, err := executor.New(cfg)
			if err != nil {
				return err
			}
			if err := e.Start(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "jobmaster executor %s: %d slots, HTTP on %s\n", cfg.NodeID, cfg.Slots, e.Addr())
			<-cmd.Context().Done()
			ctx, cancel := context.WithTimeout(context.Background(), cfg.CancelGrace+10*time.Second)
			defer cancel()
			return e.Shutdown(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.NodeID, "node-id", "", "unique name of this executor (required)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for task working directories, logs and the fencing token (required)")
	f.StringVar(&cfg.HTTPAddr, "http-addr", "127.0.0.1:7431", "host:port of the executor's HTTP endpoint")
	f.StringVar(&cfg.GossipAddr, "gossip-addr", "127.0.0.1:7441", "host:port for gossip (TCP and UDP)")
	f.StringVar(&join, "join", "", "comma-separated gossip addresses of the masters (required)")
	f.IntVar(&cfg.Slots, "slots", executor.DefaultSlots, "number of task slots")
	f.StringVar(&cfg.Runtime, "runtime", executor.RuntimeExec, "exec (real processes) or sim (simulated tasks, for tests and benchmarks)")
	f.DurationVar(&cfg.Lease, "lease", executor.DefaultLease, "every task is dead this long after the last heartbeat from a leader (self-fencing)")
	f.DurationVar(&cfg.CancelGrace, "cancel-grace", executor.DefaultCancelGrace, "time between SIGTERM and SIGKILL when a task is cancelled")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

// newShimCmd is the hidden `jobmaster shim`: the process-group leader an
// executor runs each task under. main dispatches to it before installing
// its own signal handling (the shim handles SIGTERM itself); this entry
// only documents it in the command tree.
func newShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "shim",
		Short:              "Internal: supervise one task process",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(executor.RunShim(args))
		},
	}
}
