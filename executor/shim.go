package executor

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// shimPollInterval is how often the shim checks that its executor is alive.
const shimPollInterval = 250 * time.Millisecond

// executorDeathSignal is the shim's parent-death signal (the exec runtime
// sets it): told apart from a SIGTERM that the executor sends, it says at
// once that the executor died.
const executorDeathSignal = syscall.SIGUSR2

// RunShim is the entry point of the hidden `jobmaster shim` command, which
// the exec runtime starts for every task. args are the arguments after
// "shim":
//
//	[--grace DURATION] [--executor-pid PID] [--lease-file PATH] [--cgroup DIR...]
//	[--stdout PATH --stderr PATH [--log-max-size BYTES] [--log-max-files N]]
//	-- COMMAND [ARG...]
//	--exec-in CGROUP [--exec-in CGROUP...] -- COMMAND [ARG...]
//
// With --exec-in, the process only joins the cgroups (directories of a
// cgroup hierarchy) and then executes COMMAND in its own place, looked up
// in PATH: the shim runs a task that way (runtime_exec.go), so the task is
// in its cgroups before it runs any code of its own. It exits 126 if it
// cannot join them or execute COMMAND, 127 if COMMAND is not found.
//
// The shim makes sure it leads its own process group (the executor starts
// it that way already). With --executor-pid (the executor always passes
// its own), it first checks that the executor is still its parent: one
// that died while the shim was starting (before the shim could hear its
// parent-death signal, which the Go runtime drops until it is asked for)
// would otherwise go unnoticed, and the task run on with nobody to stop
// it while the executor's next life has it placed again. Such a shim runs
// nothing and exits 125. Otherwise it runs COMMAND in that group with the
// shim's working directory, environment and standard files, and:
//   - on SIGTERM or SIGINT forwards the signal once to the whole group and
//     SIGKILLs the group (itself included) if COMMAND has not exited after
//     the grace period (default 3s);
//   - on executorDeathSignal (SIGUSR2, its parent-death signal), or when
//     getppid, polled every 250ms, says it has been reparented, knows that
//     its executor has died: it terminates the group the same way, and
//     kills whatever is left of the group once COMMAND has exited;
//   - with --cgroup (the task's cgroups), when its executor has died,
//     kills what is left in them once COMMAND has exited and removes them,
//     and their parents if that leaves them empty (nobody else will);
//   - reads the lease file as it polls (see leasefile.go): when the lease is
//     about to run out it terminates the group the same way, so the task is
//     dead when it does even if the executor is stopped or hung;
//   - with --stdout and --stderr, writes COMMAND's output (and its own
//     messages) to those logs, rotating each at --log-max-size bytes (0:
//     never) and keeping --log-max-files files of it (logrotate.go);
//     without them COMMAND inherits the shim's standard output and error;
//   - exits with COMMAND's exit code, 128+n if COMMAND was killed by signal
//     n, 127 if COMMAND cannot be found, 126 if it cannot be started, and 2
//     for a bad command line.
func RunShim(args []string) int {
	flags := flag.NewFlagSet("shim", flag.ContinueOnError)
	grace := flags.Duration("grace", DefaultCancelGrace, "time between SIGTERM and SIGKILL")
	executorPID := flags.Int("executor-pid", 0, "the pid of the executor that starts the shim (0: whichever process is its parent)")
	leaseFile := flags.String("lease-file", "", "the executor's lease file")
	var logs shimLogs
	flags.StringVar(&logs.stdout, "stdout", "", "the log of the command's standard output")
	flags.StringVar(&logs.stderr, "stderr", "", "the log of the command's standard error")
	flags.Int64Var(&logs.maxSize, "log-max-size", 0, "rotate a log at this many bytes (0: never)")
	flags.IntVar(&logs.maxFiles, "log-max-files", DefaultTaskLogMaxFiles, "files kept of each log, the current one included")
	var execIn, cgroups []string
	flags.Func("cgroup", "a cgroup of the task's, removed if the executor died (repeatable)", func(d string) error {
		cgroups = append(cgroups, d)
		return nil
	})
	flags.Func("exec-in", "join this cgroup, then execute COMMAND in place (repeatable)", func(d string) error {
		execIn = append(execIn, d)
		return nil
	})
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if len(execIn) > 0 && flags.NArg() > 0 {
		return execInCgroups(execIn, flags.Args())
	}
	if flags.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "jobmaster shim: usage: shim [--grace DURATION] [--executor-pid PID] [--lease-file PATH] [--stdout PATH --stderr PATH [--log-max-size BYTES] [--log-max-files N]] -- COMMAND [ARG...]")
		return 2
	}
	if *grace < 0 {
		fmt.Fprintln(os.Stderr, "jobmaster shim: --grace must not be negative")
		return 2
	}
	if *executorPID < 0 {
		fmt.Fprintln(os.Stderr, "jobmaster shim: --executor-pid must not be negative")
		return 2
	}
	if (logs.stdout == "") != (logs.stderr == "") || logs.maxSize < 0 || logs.maxFiles < 1 {
		fmt.Fprintln(os.Stderr, "jobmaster shim: --stdout and --stderr go together, --log-max-size must not be negative and --log-max-files must be at least 1")
		return 2
	}
	return runShim(*grace, shimPollInterval, *executorPID, *leaseFile, logs, cgroups, flags.Args())
}

// execInCgroups joins cgroups dirs and executes command in place; it
// returns only if that fails.
func execInCgroups(dirs, command []string) int {
	if err := joinCgroups(dirs); err != nil {
		fmt.Fprintf(os.Stderr, "jobmaster shim: joining the task's cgroup: %v\n", err)
		return 126
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "jobmaster shim: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	err = syscall.Exec(path, command, os.Environ())
	fmt.Fprintf(os.Stderr, "jobmaster shim: exec %s: %v\n", command[0], err)
	if errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// shimLogs is where the shim writes its command's output.
type shimLogs struct {
	stdout, stderr string
	maxSize        int64
	maxFiles       int
}

// logDrain bounds how long the shim goes on copying its command's output
// after the command exited (a child it left may hold the pipe open).
const logDrain = time.Second

// exitExecutorGone is the shim's exit code when its executor died before
// the shim started the command.
const exitExecutorGone = 125

func runShim(grace, poll time.Duration, executorPID int, leaseFile string, logs shimLogs, cgroups, command []string) int {
	// Listen for the parent-death signal before looking at the parent: an
	// executor that dies after this is heard, one that died before it is
	// no longer the parent (the kernel reparents before it signals).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, executorDeathSignal)
	defer signal.Stop(sigs)
	parent := os.Getppid()
	if executorPID != 0 && parent != executorPID {
		fmt.Fprintf(os.Stderr, "jobmaster shim: the executor (pid %d) died before the task started: not starting it\n", executorPID)
		removeOrphanCgroups(cgroups)
		return exitExecutorGone
	}
	pgid := os.Getpid()
	if syscall.Getpgrp() != pgid {
		// Never signal a group the shim does not lead (a caller's shell).
		if err := syscall.Setpgid(0, 0); err != nil {
			fmt.Fprintf(os.Stderr, "jobmaster shim: new process group: %v\n", err)
			return 126
		}
	}

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	var stderr io.Writer = os.Stderr // the shim's own messages
	var copying sync.WaitGroup
	if logs.stdout != "" {
		out, err := startLog(cmd, &cmd.Stdout, logs.stdout, logs, &copying)
		if err != nil {
			fmt.Fprintf(os.Stderr, "jobmaster shim: stdout log: %v\n", err)
			return 126
		}
		defer out.Close()
		errLog, err := startLog(cmd, &cmd.Stderr, logs.stderr, logs, &copying)
		if err != nil {
			fmt.Fprintf(os.Stderr, "jobmaster shim: stderr log: %v\n", err)
			return 126
		}
		defer errLog.Close()
		stderr = errLog
	}
	err := cmd.Start()
	closeWriteEnds(cmd)
	if err != nil {
		fmt.Fprintf(stderr, "jobmaster shim: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		drained := make(chan struct{})
		go func() {
			copying.Wait()
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(logDrain):
		}
		close(done)
	}()

	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	var killTimer <-chan time.Time
	terminating, orphaned := false, false
	terminate := func(sig syscall.Signal) {
		if terminating {
			return // includes the copy of our own forwarded signal
		}
		terminating = true
		_ = syscall.Kill(-pgid, sig)
		killTimer = time.After(grace)
	}
	for {
		select {
		case <-done:
			if orphaned || executorGone(parent) {
				// Nobody is left to clean up the group and the cgroups: do
				// it (and die).
				removeOrphanCgroups(cgroups)
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			return shimExitCode(cmd.ProcessState)
		case s := <-sigs:
			if s != executorDeathSignal {
				terminate(s.(syscall.Signal))
			} else if !orphaned {
				orphaned = true
				fmt.Fprintln(stderr, "jobmaster shim: the executor died: stopping the task")
				terminate(syscall.SIGTERM)
			}
		case <-ticker.C:
			if !orphaned && os.Getppid() != parent {
				orphaned = true
				fmt.Fprintln(stderr, "jobmaster shim: the executor died: stopping the task")
				terminate(syscall.SIGTERM)
			}
			if leaseFile != "" && !terminating {
				if deadline, ok := readLeaseFile(leaseFile); ok && shimMustStop(monotonic(), deadline, grace) {
					fmt.Fprintf(stderr, "jobmaster shim: the executor's lease runs out in %s: stopping the task\n", (deadline - monotonic()).Round(time.Millisecond))
					terminate(syscall.SIGTERM)
				}
			}
		case <-killTimer:
			fmt.Fprintf(stderr, "jobmaster shim: the task did not exit %s after SIGTERM: killing it\n", grace)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// executorGone reports whether the shim's executor, process parent, has
// died: the shim has been given another parent, or its parent is a zombie
// (its threads die one by one, and the parent-death signal comes with the
// first, before the shim is given another parent).
func executorGone(parent int) bool {
	if os.Getppid() != parent {
		return true
	}
	stat, err := readBounded("/proc/"+strconv.Itoa(parent)+"/stat", 4096)
	if err != nil {
		return true
	}
	st := procStatState(stat)
	return st == "Z" || st == "X"
}

// procStatState is the state field of a /proc/<pid>/stat line ("" if
// there is none): the first after the command name, which may hold
// spaces and parentheses.
func procStatState(stat string) string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(stat[i+1:])
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// shimExitCode is the command's exit code, 128+n if signal n killed it.
func shimExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// startLog opens the rotating log at path and makes *into (the command's
// stdout or stderr) the write end of a pipe that a goroutine copies into
// it, counted in copying. The write end is the command's own file, so that
// waiting for the command does not wait for the copy (closeWriteEnds
// closes the shim's copy once the command has started).
func startLog(cmd *exec.Cmd, into *io.Writer, path string, logs shimLogs, copying *sync.WaitGroup) (*rotator, error) {
	r, err := openRotator(path, logs.maxSize, logs.maxFiles)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		r.Close()
		return nil, err
	}
	*into = pw
	copying.Add(1)
	go func() {
		defer copying.Done()
		defer pr.Close()
		copyLog(r, pr)
	}()
	return r, nil
}

// copyLog copies a task's output from pr into its log until the task's
// end of the pipe closes. It never stops reading: a task whose log cannot
// be written (the disk is full) would otherwise die of SIGPIPE at its next
// line. What cannot be written is lost, and once the log takes writes
// again it says how much and why.
func copyLog(log io.Writer, pr io.Reader) {
	buf := make([]byte, 32<<10)
	var lost int64
	var why error
	// say writes what was lost, and reports whether the log took it.
	say := func() bool {
		_, err := log.Write([]byte(fmt.Sprintf("\n[jobmaster: %d bytes of this output were lost: %v]\n", lost, why)))
		return err == nil
	}
	for {
		n, err := pr.Read(buf)
		if n > 0 {
			if lost > 0 && say() {
				lost = 0
			}
			if lost > 0 {
				lost += int64(n)
			} else if w, werr := log.Write(buf[:n]); werr != nil {
				lost, why = int64(n-w), werr
			}
		}
		if err != nil {
			if lost > 0 {
				say() // the task is done: one last try
			}
			return
		}
	}
}

// closeWriteEnds closes the shim's copies of the pipes' write ends: the
// copies end when the command (and whatever it started) closes its own.
func closeWriteEnds(cmd *exec.Cmd) {
	for _, w := range []io.Writer{cmd.Stdout, cmd.Stderr} {
		if f, ok := w.(*os.File); ok && f != os.Stdout && f != os.Stderr {
			_ = f.Close()
		}
	}
}
