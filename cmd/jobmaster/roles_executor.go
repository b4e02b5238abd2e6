package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/executor"
	"jobmaster/launch"
)

// newExecutorCmd is `jobmaster executor`: one executor.
func newExecutorCmd() *cobra.Command {
	var o launch.Executor
	cmd := &cobra.Command{
		Use:   launch.ExecutorCommand,
		Short: "Run an executor that runs tasks for the leader",
		Long: `Run an executor. It joins the masters' gossip with its slot count; the
leader finds it there, heartbeats it and deploys tasks onto its slots. Each
task is a process in its own process group, in a working directory under
--data-dir with its stdout and stderr captured there, and in cgroups of its
own capped at the CPU and memory it declares where the host allows (root;
cgroup v2, or v1 on a hybrid host; --disable-cgroups turns it off). A task
past its memory is FAILED "out of memory".

The executor obeys only the newest leader it has heard from (fencing), and
has every task dead within --lease of the last heartbeat from a leader
(self-fencing): it starts stopping them --cancel-grace (+0.5s) before the
lease runs out. Keep --lease equal to the masters' --executor-lease, which
they check against their --executor-timeout.

Beyond loopback an executor needs TLS (--tls-ca, --tls-cert, --tls-key) and
a gossip key, or --insecure (docs/security.md). SIGHUP rereads the
certificates and the --gossip-keyring file. SIGTERM first drains the
executor for --drain-grace: it asks the leader for no new work, lets what
runs finish, and has what is left moved elsewhere, then stops.`,
		Example: `  jobmaster executor --node-id e1 --data-dir /var/lib/jobmaster/e1 \
    --http-addr 10.0.0.4:7431 --gossip-addr 10.0.0.4:7441 \
    --join 10.0.0.1:7421,10.0.0.2:7421,10.0.0.3:7421 --slots 8`,
		Args: groupArgs, // none: a word after it is an unknown command
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "node-id", "data-dir"); err != nil {
				return err
			}
			if err := checkNodeID(cmd, o.NodeID); err != nil {
				return err
			}
			if len(o.Join) == 0 {
				return usageErrorf(cmd, "--join is required: the gossip addresses of the masters")
			}
			if err := o.Check(); err != nil {
				return usageErrorf(cmd, "%v", err)
			}
			logger, err := newLogger(cmd, o.LogLevel, o.LogFormat)
			if err != nil {
				return err
			}
			cfg := o.Config
			cfg.Logger = logger
			e, err := executor.New(cfg)
			if err != nil {
				return err
			}
			if err := e.Start(); err != nil {
				return err
			}
			slots := cfg.Slots
			if slots == 0 {
				slots = executor.DefaultSlots
			}
			if !strings.EqualFold(o.LogFormat, "json") { // in JSON, "executor started" says it
				fmt.Fprintf(cmd.ErrOrStderr(), "jobmaster executor %s: %d slots, HTTP on %s\n", cfg.NodeID, slots, e.Addr())
			}
			serveUntilDone(cmd.Context(), nil, e.Reload)
			if cfg.DrainGrace > 0 {
				dctx, dcancel := context.WithTimeout(context.Background(), cfg.DrainGrace+cfg.CancelGrace+5*time.Second)
				// A second SIGINT or SIGTERM ends the drain: the executor
				// then stops as it would without one (its tasks stopped,
				// the leader told, gossip left). A third one kills it.
				dctx, unnotify := signal.NotifyContext(dctx, os.Interrupt, syscall.SIGTERM)
				stopNow := context.AfterFunc(dctx, func() {
					if dctx.Err() == context.Canceled {
						logger.Warn("second signal: the drain stops, and the executor stops its tasks now (a third signal kills it)")
					}
				})
				_ = e.Drain(dctx, cfg.DrainGrace) // a failed drain stops at once; Drain logs why
				stopNow()
				unnotify()
				dcancel()
			}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.CancelGrace+10*time.Second)
			defer cancel()
			return e.Shutdown(ctx)
		},
	}
	launch.ExecutorFlags(cmd.Flags(), &o)
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
