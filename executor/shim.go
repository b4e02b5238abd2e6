package executor

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// shimPollInterval is how often the shim checks that its executor is alive.
const shimPollInterval = 250 * time.Millisecond

// RunShim is the entry point of the hidden `jobmaster shim` command, which
// the exec runtime starts for every task. args are the arguments after
// "shim":
//
//	[--grace DURATION] [--lease-file PATH] -- COMMAND [ARG...]
//
// The shim makes sure it leads its own process group (the executor starts
// it that way already), runs COMMAND in that group with the shim's working
// directory, environment and standard files, and:
//   - on SIGTERM or SIGINT forwards the signal once to the whole group and
//     SIGKILLs the group (itself included) if COMMAND has not exited after
//     the grace period (default 3s);
//   - polls getppid every 250ms: when its executor has died (it has been
//     reparented) it terminates the group the same way, and kills whatever
//     is left of the group once COMMAND has exited;
//   - reads the lease file as it polls (see leasefile.go): when the lease is
//     about to run out it terminates the group the same way, so the task is
//     dead when it does even if the executor is stopped or hung;
//   - exits with COMMAND's exit code, 128+n if COMMAND was killed by signal
//     n, 127 if COMMAND cannot be found, 126 if it cannot be started, and 2
//     for a bad command line.
func RunShim(args []string) int {
	flags := flag.NewFlagSet("shim", flag.ContinueOnError)
	grace := flags.Duration("grace", DefaultCancelGrace, "time between SIGTERM and SIGKILL")
	leaseFile := flags.String("lease-file", "", "the executor's lease file")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "jobmaster shim: usage: shim [--grace DURATION] [--lease-file PATH] -- COMMAND [ARG...]")
		return 2
	}
	if *grace < 0 {
		fmt.Fprintln(os.Stderr, "jobmaster shim: --grace must not be negative")
		return 2
	}
	return runShim(*grace, shimPollInterval, *leaseFile, flags.Args())
}

func runShim(grace, poll time.Duration, leaseFile string, command []string) int {
	parent := os.Getppid()
	pgid := os.Getpid()
	if syscall.Getpgrp() != pgid {
		// Never signal a group the shim does not lead (a caller's shell).
		if err := syscall.Setpgid(0, 0); err != nil {
			fmt.Fprintf(os.Stderr, "jobmaster shim: new process group: %v\n", err)
			return 126
		}
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "jobmaster shim: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
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
			if orphaned || os.Getppid() != parent {
				// Nobody is left to clean up the group: do it (and die).
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			return shimExitCode(cmd.ProcessState)
		case s := <-sigs:
			terminate(s.(syscall.Signal))
		case <-ticker.C:
			if !orphaned && os.Getppid() != parent {
				orphaned = true
				fmt.Fprintln(os.Stderr, "jobmaster shim: the executor died: stopping the task")
				terminate(syscall.SIGTERM)
			}
			if leaseFile != "" && !terminating {
				if deadline, ok := readLeaseFile(leaseFile); ok && shimMustStop(monotonic(), deadline, grace) {
					fmt.Fprintf(os.Stderr, "jobmaster shim: the executor's lease runs out in %s: stopping the task\n", (deadline - monotonic()).Round(time.Millisecond))
					terminate(syscall.SIGTERM)
				}
			}
		case <-killTimer:
			fmt.Fprintf(os.Stderr, "jobmaster shim: the task did not exit %s after SIGTERM: killing it\n", grace)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// shimExitCode is the command's exit code, 128+n if signal n killed it.
func shimExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
