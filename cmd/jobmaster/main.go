// Command jobmaster is the one binary of jobmaster: the server roles
// (`server`, `executor`, `dev`) and the client commands (`job ...`,
// `members`) that talk to the masters' HTTP API.
//
// Exit codes: 0 success, 1 failure (including a waited-for job that did not
// finish), 2 usage error, 130 interrupted while waiting for a job.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"jobmaster/executor"
	"jobmaster/jobspec"
)

func main() {
	// A task's shim handles its own signals: dispatch before anything else
	// installs handlers.
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(executor.RunShim(os.Args[2:]))
	}
	// The commands' context ends on the first SIGINT or SIGTERM; a second
	// one gets the default behaviour (the process dies), but while an
	// executor drains, where it ends the drain (roles_executor.go).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], &cliEnv{
		stdin:        os.Stdin,
		stdout:       os.Stdout,
		stderr:       os.Stderr,
		getenv:       os.Getenv,
		pollInterval: defaultPollInterval,
		stuckAfter:   defaultStuckAfter,
		terminal:     detectTerminal,
	})
	stop()
	os.Exit(code)
}

// cliEnv is everything the commands take from the process, so that tests
// can run them in-process.
type cliEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// pollInterval is how often a waiting command polls the job.
	pollInterval time.Duration
	// stuckAfter is how long a waited-for job may have nothing placed
	// before the command says why.
	stuckAfter time.Duration
	// terminal reports whether w is an interactive terminal, and its size.
	terminal func(w io.Writer) (size termSize, ok bool)
}

// waitOpts is how a waiting command polls a job of spec (nil: not at
// hand).
func (e *cliEnv) waitOpts(spec *jobspec.Spec) waitOpts {
	w := waitOpts{interval: e.pollInterval, stuckAfter: e.stuckAfter}
	if spec != nil {
		w.need = spec.StartSlots()
		for _, v := range spec.Vertices {
			w.resources = w.resources || v.Resources != nil && !v.Resources.IsZero()
		}
	}
	return w
}

// run executes the command line args and returns the exit code. It never
// panics: a panic is reported as an internal error.
func run(ctx context.Context, args []string, env *cliEnv) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(env.stderr, "Error: internal error: %v (this is a bug in jobmaster)\n", r)
			code = exitFailure
		}
	}()
	if args == nil {
		args = []string{} // nil makes cobra read os.Args
	}
	root := newRootCmd(env)
	root.SetArgs(args)
	root.SetIn(env.stdin)
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	err := root.ExecuteContext(ctx)
	return report(env.stderr, err)
}

// newRootCmd builds the jobmaster command tree.
func newRootCmd(env *cliEnv) *cobra.Command {
	root := &cobra.Command{
		Use:   "jobmaster",
		Short: "A highly available job master",
		Long: `jobmaster runs jobs on a cluster: Raft-replicated masters schedule the
subtasks of submitted jobs onto executors.

Start a local cluster with 'jobmaster dev', then submit a job with
'jobmaster job run FILE'.`,
		Args:          groupArgs,
		RunE:          runGroup,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.Version = thisBuild().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErrorf(cmd, "%v%s", err, flagSuggestion(cmd, err))
	})
	root.AddCommand(
		newServerCmd(),
		newExecutorCmd(),
		newDevCmd(env),
		newShimCmd(),
		newJobCmd(env),
		newMembersCmd(env),
		newExecutorsCmd(env),
		newOperatorCmd(env),
		newACLCmd(env),
		newTLSCmd(),
		newVersionCmd(),
	)
	return root
}
