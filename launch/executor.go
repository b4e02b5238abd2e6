package launch

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"jobmaster/executor"
	"jobmaster/jobspec"
	"jobmaster/transport"
)

// ExecutorCommand is the command that runs an executor.
const ExecutorCommand = "executor"

// Executor is the options of `jobmaster executor`.
type Executor struct {
	executor.Config
	// LogLevel is --log-level: debug, info, warn or error; LogFormat is
	// --log-format: text or json.
	LogLevel  string
	LogFormat string
	// Extra is appended to the argv as it is, after every registered flag
	// (a later occurrence of a flag wins).
	Extra []string
}

// ExecutorFlags registers every flag of `jobmaster executor` on fs, bound to
// o's fields, and sets those fields to their defaults.
func ExecutorFlags(fs *pflag.FlagSet, o *Executor) {
	c := &o.Config
	fs.StringVar(&c.NodeID, "node-id", "", "unique name of this executor (required)")
	fs.StringVar(&c.DataDir, "data-dir", "", "directory for task working directories, logs and the fencing token (required)")
	fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:7431", "host:port of the executor's HTTP endpoint")
	fs.StringVar(&c.GossipAddr, "gossip-addr", "127.0.0.1:7441", "host:port for gossip (TCP and UDP)")
	fs.Var(newListValue(&c.Join, nil), "join", "comma-separated gossip addresses of the masters (required)")
	fs.IntVar(&c.Slots, "slots", executor.DefaultSlots, "number of task slots")
	fs.StringVar(&c.Runtime, "runtime", executor.RuntimeExec, "exec (real processes) or sim (simulated tasks, for tests and benchmarks)")
	fs.DurationVar(&c.Lease, "lease", executor.DefaultLease, "every task is dead this long after the last heartbeat from a leader (self-fencing)")
	fs.DurationVar(&c.CancelGrace, "cancel-grace", executor.DefaultCancelGrace, "time between SIGTERM and SIGKILL when a task is cancelled")
	fs.DurationVar(&c.DrainGrace, "drain-grace", executor.DefaultDrainGrace, "on SIGTERM, how long the executor drains (no new work; what runs may finish, what is left is moved elsewhere) before it stops (0: stop at once)")
	fs.DurationVar(&c.FetchTimeout, "fetch-timeout", executor.DefaultFetchTimeout, "how long fetching one input of a task may keep failing (retried with backoff from 100ms to 10s) before the task fails")
	fs.DurationVar(&c.GCRetention, "gc-retention", executor.DefaultGCRetention, "how long the working directory and logs of an ended, acknowledged execution are kept")
	fs.Var(newSizeValue(&c.GCDiskLimit, 0), "gc-disk-limit", "bound on the disk space of all execution directories together (e.g. 10GiB): past it, acknowledged ones are deleted before their retention, oldest first (0: no bound)")
	fs.DurationVar(&c.GCInterval, "gc-interval", executor.DefaultGCInterval, "how often execution directories are collected")
	fs.Var(newSizeValue(&c.TaskLogMaxSize, executor.DefaultTaskLogMaxSize), "task-log-max-size", "a task's stdout.log and stderr.log rotate at this size")
	fs.IntVar(&c.TaskLogMaxFiles, "task-log-max-files", executor.DefaultTaskLogMaxFiles, "files kept of each task log, the current one included (1 to 1000)")
	fs.Int64Var(&c.CPUMillis, "cpu-millis", 0, "CPU offered for the resources tasks declare, in thousandths of a core (0: all of the host's)")
	fs.Int64Var(&c.MemoryMB, "memory-mb", 0, "memory offered for the resources tasks declare, in MiB (0: all of the host's)")
	fs.BoolVar(&c.DisableCgroups, "disable-cgroups", false, "run tasks without cgroups: the resources they declare are then not enforced")
	fs.Int64Var(&c.TaskPidsMax, "task-pids-max", executor.DefaultTaskPidsMax, "how many processes and threads one task may have at once, where tasks run in cgroups (-1: no bound)")
	fs.Var(newSizeValue(&c.DiskReserve, executor.DefaultDiskReserve), "disk-reserve", "the data directory's disk counts as full, and the leader places nothing here, while less than this is free")
	fs.IntVar(&c.MaxConnsPerClient, "http-max-conns-per-client", transport.DefaultMaxConnsPerClient, "the most HTTP connections one client address may hold open (loopback is not counted, nor with TLS a master's or an executor's; -1: no bound)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", "text", "text (key=value) or json (one object per line), on stderr")
	securityFlags(fs, &c.TLS, &c.GossipKeys, &c.GossipKeyring, &c.Insecure)
}

// Check refuses flag values that mean nothing an operator could want: the
// executor's configuration takes 0 for "the default" in these, so an
// explicit 0 (or a negative drain) would otherwise pass for something the
// flag's help does not say.
func (o *Executor) Check() error {
	c := &o.Config
	var errs []error
	if c.Slots < 0 {
		errs = append(errs, fmt.Errorf("--slots must not be negative, got %d (0: the default, %d)", c.Slots, executor.DefaultSlots))
	}
	if c.DrainGrace < 0 {
		errs = append(errs, fmt.Errorf("--drain-grace must not be negative, got %s (0: stop at once)", c.DrainGrace))
	}
	if c.TaskLogMaxFiles < 1 || c.TaskLogMaxFiles > 1000 {
		errs = append(errs, fmt.Errorf("--task-log-max-files must be between 1 and 1000, got %d", c.TaskLogMaxFiles))
	}
	if c.TaskLogMaxSize <= 0 {
		errs = append(errs, fmt.Errorf("--task-log-max-size must be positive, got %d", c.TaskLogMaxSize))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--lease", c.Lease}, {"--cancel-grace", c.CancelGrace}, {"--fetch-timeout", c.FetchTimeout}, {"--gc-retention", c.GCRetention}, {"--gc-interval", c.GCInterval}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s (0: the default)", d.flag, d.v))
		}
	}
	if c.CPUMillis < 0 || c.CPUMillis > jobspec.MaxCPUMillis {
		errs = append(errs, fmt.Errorf("--cpu-millis must be between 0 (all of the host's) and %d, got %d", jobspec.MaxCPUMillis, c.CPUMillis))
	}
	if c.MemoryMB < 0 || c.MemoryMB > jobspec.MaxMemoryMB {
		errs = append(errs, fmt.Errorf("--memory-mb must be between 0 (all of the host's) and %d, got %d", jobspec.MaxMemoryMB, c.MemoryMB))
	}
	if c.TaskPidsMax == 0 || c.TaskPidsMax < -1 {
		errs = append(errs, fmt.Errorf("--task-pids-max must be positive, or -1 for no bound, got %d", c.TaskPidsMax))
	}
	errs = append(errs, checkMaxConns(c.MaxConnsPerClient), checkJoin(c.Join))
	return errors.Join(errs...)
}

// checkJoin refuses a --join address that is not host:port (a port
// number): gossip would only ever fail to reach it, with nothing said.
func checkJoin(addrs []string) error {
	var errs []error
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || !validPort(port) {
			errs = append(errs, fmt.Errorf("--join %q is not host:port (the gossip address of a master, such as 10.0.0.1:7421)", a))
		}
	}
	return errors.Join(errs...)
}

// validPort reports whether p is a port number, 1 to 65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == p
}

// checkMaxConns checks --http-max-conns-per-client.
func checkMaxConns(n int) error {
	if n == 0 || n < -1 {
		return fmt.Errorf("--http-max-conns-per-client must be positive, or -1 for no bound, got %d", n)
	}
	return nil
}

// DefaultExecutor is the options of an executor started with no flags.
func DefaultExecutor() Executor {
	var o Executor
	ExecutorFlags(pflag.NewFlagSet(ExecutorCommand, pflag.ContinueOnError), &o)
	return o
}

// Args is the argv (without the binary) that starts an executor with o.
func (o Executor) Args() []string { return render(ExecutorCommand, o, ExecutorFlags, o.Extra) }
