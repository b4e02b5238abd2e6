package executor

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"jobmaster/executor/partition"
	"jobmaster/jobspec"
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
	// DefaultGCRetention is Config.GCRetention unless set.
	DefaultGCRetention = 4 * time.Hour
	// DefaultTaskLogMaxSize and DefaultTaskLogMaxFiles are
	// Config.TaskLogMaxSize and TaskLogMaxFiles unless set.
	DefaultTaskLogMaxSize  = 10 << 20
	DefaultTaskLogMaxFiles = 10
	// maxTaskLogFiles bounds TaskLogMaxFiles.
	maxTaskLogFiles = 1000
	// DefaultDiskReserve is Config.DiskReserve unless set.
	DefaultDiskReserve = 1 << 20
	// DefaultGCInterval is Config.GCInterval unless set.
	DefaultGCInterval = time.Minute
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
	// GCRetention is how long the working directory and logs of an
	// execution that ended, and that the leader has acknowledged, are kept
	// (default 4h).
	GCRetention time.Duration
	// GCDiskLimit bounds the disk space of every execution directory
	// together, in bytes: past it, the directories of acknowledged
	// executions are deleted before their retention, those that ended
	// first going first (0: no bound).
	GCDiskLimit int64
	// GCInterval is how often the execution directories are collected
	// (default 1m).
	GCInterval time.Duration
	// TaskLogMaxSize is the size at which a task's stdout.log and
	// stderr.log rotate (default 10 MiB), and TaskLogMaxFiles how many
	// files of each are kept, the current one included (default 10): a
	// task's logs take at most their product each.
	TaskLogMaxSize  int64
	TaskLogMaxFiles int
	// CPUMillis and MemoryMB are what the executor offers for the
	// resources tasks declare (thousandths of a core, MiB); 0: the
	// host's (its CPUs, /proc/meminfo's MemTotal).
	CPUMillis int64
	MemoryMB  int64
	// DisableCgroups runs the exec runtime's tasks without cgroups: their
	// declared resources are not enforced. Otherwise each task runs in
	// its own cgroup, capped at what it declared, where the host allows
	// (cgroup.go).
	DisableCgroups bool
	// TaskPidsMax is how many processes and threads one task may have at
	// once, where tasks run in cgroups (0: DefaultTaskPidsMax; -1: no
	// bound).
	TaskPidsMax int64
	// DiskReserve: while less than this many bytes are free on the data
	// directory's filesystem, the disk counts as full (reported as
	// disk_full; the leader places nothing here). Default 1 MiB.
	DiskReserve int64
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
	} else if abs, err := filepath.Abs(c.DataDir); err != nil {
		errs = append(errs, fmt.Errorf("data dir: %w", err))
	} else {
		// Tasks and their shims run in directories of their own: a
		// relative path would not name the same place there.
		c.DataDir = abs
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
	errs = appendErr(errs, defaultDuration(&c.Lease, DefaultLease, "lease"))
	errs = appendErr(errs, defaultDuration(&c.CancelGrace, DefaultCancelGrace, "cancel grace"))
	errs = appendErr(errs, defaultDuration(&c.FetchTimeout, DefaultFetchTimeout, "fetch timeout"))
	errs = appendErr(errs, defaultDuration(&c.GCRetention, DefaultGCRetention, "gc retention"))
	errs = appendErr(errs, defaultDuration(&c.GCInterval, DefaultGCInterval, "gc interval"))
	switch {
	case c.TaskLogMaxSize < 0:
		errs = append(errs, fmt.Errorf("task log max size must not be negative, got %d", c.TaskLogMaxSize))
	case c.TaskLogMaxSize == 0:
		c.TaskLogMaxSize = DefaultTaskLogMaxSize
	}
	switch {
	case c.TaskLogMaxFiles < 0 || c.TaskLogMaxFiles > maxTaskLogFiles:
		errs = append(errs, fmt.Errorf("task log max files must be between 1 and %d, got %d", maxTaskLogFiles, c.TaskLogMaxFiles))
	case c.TaskLogMaxFiles == 0:
		c.TaskLogMaxFiles = DefaultTaskLogMaxFiles
	}
	switch {
	case c.CPUMillis < 0 || c.CPUMillis > jobspec.MaxCPUMillis:
		errs = append(errs, fmt.Errorf("cpu millis must be between 0 (the host's) and %d, got %d", jobspec.MaxCPUMillis, c.CPUMillis))
	case c.CPUMillis == 0:
		c.CPUMillis = hostCPUMillis()
	}
	switch {
	case c.MemoryMB < 0 || c.MemoryMB > jobspec.MaxMemoryMB:
		errs = append(errs, fmt.Errorf("memory mb must be between 0 (the host's) and %d, got %d", jobspec.MaxMemoryMB, c.MemoryMB))
	case c.MemoryMB == 0:
		c.MemoryMB = hostMemoryMB()
	}
	switch {
	case c.DiskReserve < 0:
		errs = append(errs, fmt.Errorf("disk reserve must not be negative, got %d", c.DiskReserve))
	case c.DiskReserve == 0:
		c.DiskReserve = DefaultDiskReserve
	}
	switch {
	case c.TaskPidsMax < -1:
		errs = append(errs, fmt.Errorf("task pids max must be positive, 0 (the default, %d) or -1 (no bound), got %d", DefaultTaskPidsMax, c.TaskPidsMax))
	case c.TaskPidsMax == 0:
		c.TaskPidsMax = DefaultTaskPidsMax
	}
	if c.GCDiskLimit < 0 {
		errs = append(errs, fmt.Errorf("gc disk limit must not be negative, got %d", c.GCDiskLimit))
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

// defaultDuration sets *d to def when it is 0; a negative one is an error
// naming what it is.
func defaultDuration(d *time.Duration, def time.Duration, what string) error {
	switch {
	case *d < 0:
		return fmt.Errorf("%s must be positive, got %s", what, *d)
	case *d == 0:
		*d = def
	}
	return nil
}

// appendErr appends err to errs unless it is nil.
func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}
