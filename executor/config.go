package executor

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"jobmaster/executor/partition"
	"jobmaster/membership"
	"jobmaster/transport"
	"jobmaster/wire"
)

// Runtimes.
const (
	// RuntimeExec runs every task as a real process under the shim.
	RuntimeExec = "exec"
	// RuntimeSim runs no process: a task ends after Env["SIM_DURATION"]
	// with exit code Env["SIM_EXIT_CODE"].
	RuntimeSim = "sim"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultSlots       = 4
	DefaultLease       = wire.DefaultLease
	DefaultCancelGrace = 3 * time.Second
	// DefaultFetchTimeout is Config.FetchTimeout unless set.
	DefaultFetchTimeout = partition.DefaultTimeout
	// killMargin is how long a SIGKILLed process group may take to die.
	killMargin = 500 * time.Millisecond
)

// Config configures an executor.
type Config struct {
	// NodeID names the executor in gossip and in its reports.
	NodeID string
	// DataDir holds the persisted fencing token and the executions' working
	// directories. It is created if missing.
	DataDir string
	// HTTPAddr is the host:port to serve on; port 0 picks a free port (Addr
	// reports it).
	HTTPAddr string
	// GossipAddr is the host:port for memberlist. Empty runs the executor
	// without gossip (a leader must then be told its HTTP address directly).
	GossipAddr string
	// Join lists master gossip addresses.
	Join []string
	// SlowGossip, when set, slows the gossip failure detector (see
	// membership.Config.Slow): for many executors in one process only.
	SlowGossip *membership.Timings
	// Slots is the number of slots offered (default 4, at most
	// wire.MaxSlots).
	Slots int
	// Runtime is RuntimeExec (default) or RuntimeSim.
	Runtime string
	// Lease is the self-fencing lease (default 10s): every task is dead
	// within Lease of the last heartbeat from a leader. Stopping begins
	// early enough for that (see fenceAfter).
	Lease time.Duration
	// CancelGrace is how long a cancelled task has between SIGTERM and
	// SIGKILL (default 3s).
	CancelGrace time.Duration
	// DrainGrace is how long the executor, told to stop (SIGTERM), lets its
	// work go on, drained, before it stops what is left (Drain; default
	// DefaultDrainGrace in the binary's flags, 0: stop at once).
	DrainGrace time.Duration
	// FetchTimeout is how long the fetch of one input may go on failing
	// (no answer, 404, 409, 5xx; retried 100 ms after a failure, then
	// twice as late each time, at most 10 s apart) before the consumer
	// gives up: its task ends FAILED, naming the producer executions it
	// could not fetch in Unavailable (default 60s).
	FetchTimeout time.Duration
	// ShimCommand starts the task shim; the executor appends the shim's
	// arguments (see RunShim). Default: {os.Executable(), "shim"}.
	ShimCommand []string
	// Security (tls.go, docs/security.md). TLS names the executor's CA,
	// certificate and key (all three or none); the certificate must be an
	// executor's for NodeID.
	TLS transport.TLSFiles
	// GossipKeys (the first used) or GossipKeyring (a file of keys, read
	// again on Reload) encrypt gossip.
	GossipKeys    []string
	GossipKeyring string
	// Insecure lets an executor listening beyond loopback start without
	// TLS or a gossip key (with a warning).
	Insecure bool
	// MaxConnsPerClient bounds the HTTP connections one client address may
	// hold open (0: transport's default; negative: no bound).
	MaxConnsPerClient int
	// Logger receives the executor's log (default: discarded).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node id is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("http address is required"))
	}
	switch {
	case c.Slots < 0:
		errs = append(errs, fmt.Errorf("slots must be positive, got %d", c.Slots))
	case c.Slots == 0:
		c.Slots = DefaultSlots
	case c.Slots > wire.MaxSlots:
		errs = append(errs, fmt.Errorf("slots: at most %d, got %d", wire.MaxSlots, c.Slots))
	}
	switch c.Runtime {
	case "":
		c.Runtime = RuntimeExec
	case RuntimeExec, RuntimeSim:
	default:
		errs = append(errs, fmt.Errorf("runtime %q: want %q or %q", c.Runtime, RuntimeExec, RuntimeSim))
	}
	switch {
	case c.Lease < 0:
		errs = append(errs, fmt.Errorf("lease must be positive, got %s", c.Lease))
	case c.Lease == 0:
		c.Lease = DefaultLease
	}
	switch {
	case c.CancelGrace < 0:
		errs = append(errs, fmt.Errorf("cancel grace must be positive, got %s", c.CancelGrace))
	case c.CancelGrace == 0:
		c.CancelGrace = DefaultCancelGrace
	}
	switch {
	case c.FetchTimeout < 0:
		errs = append(errs, fmt.Errorf("fetch timeout must be positive, got %s", c.FetchTimeout))
	case c.FetchTimeout == 0:
		c.FetchTimeout = DefaultFetchTimeout
	}
	if c.Runtime == RuntimeExec && c.Lease > 0 && c.CancelGrace >= 0 && c.fenceAfter() < 500*time.Millisecond {
		errs = append(errs, fmt.Errorf("lease %s is too short for a cancel grace of %s: tasks must be stopped within the lease, so it must exceed the grace by at least %s",
			c.Lease, c.CancelGrace, killMargin+500*time.Millisecond))
	}
	if len(c.ShimCommand) == 0 && c.Runtime == RuntimeExec {
		exe, err := os.Executable()
		if err != nil {
			errs = append(errs, fmt.Errorf("shim command: %w", err))
		}
		c.ShimCommand = []string{exe, "shim"}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("executor config: %w", err)
	}
	return c, nil
}

// fenceAfter is how long after the last heartbeat the executor starts
// stopping its tasks: early enough that a task ignoring SIGTERM is killed,
// and dead, when the lease runs out. Simulated tasks stop at once.
func (c Config) fenceAfter() time.Duration {
	if c.Runtime == RuntimeSim {
		return c.Lease
	}
	return c.Lease - c.CancelGrace - killMargin
}

// rememberForgotten is how long an acknowledged, forgotten execution is
// remembered so that a late deploy of it is not run again: well past the
// longest a deploy request can be in flight (wire.MaxRequestTimeout) or be
// held up by a frozen executor that has not yet fenced itself (the lease).
func (c *Config) rememberForgotten() time.Duration {
	return max(6*wire.MaxRequestTimeout, 3*c.Lease)
}
