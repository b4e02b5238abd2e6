package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"jobmaster/jobspec"
)

// newLogger is the servers' structured logger on stderr, as text
// (key=value) or JSON lines; a bad level or format is a usage error. Every
// line of a node carries the same keys for the same things: node (the node
// logging), job, execution (an execution id; executions for a list),
// token (a fencing token), executor and leader (other nodes).
func newLogger(cmd *cobra.Command, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return nil, usageErrorf(cmd, "--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), opts)), nil
	}
	return nil, usageErrorf(cmd, "--log-format %q: use text or json", format)
}

// checkNodeID: a node id names the node in Raft, gossip, URLs
// (remove-peer) and execution records, so it follows the rule for job ids.
func checkNodeID(cmd *cobra.Command, id string) error {
	if err := jobspec.CheckID(id); err != nil {
		return usageErrorf(cmd, "--node-id: %v", err)
	}
	return nil
}

// requireFlags is a usage error naming the first of the flags not given.
func requireFlags(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f != nil && f.Value.String() == "" {
			return usageErrorf(cmd, "--%s is required", n)
		}
	}
	return nil
}

// serveUntilDone waits until ctx ends or halted is closed (nil: never),
// and on every SIGHUP calls reload
// (certificates and gossip keys are reread, as Nomad rereads its
// configuration), which logs what it reloaded and what it kept (a part
// that fails to load is kept as it was).
func serveUntilDone(ctx context.Context, halted <-chan struct{}, reload func() error) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-halted:
			return
		case <-hup:
			_ = reload() // logged by the node
		}
	}
}
