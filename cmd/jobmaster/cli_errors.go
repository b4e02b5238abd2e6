package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"jobmaster/client"
	"jobmaster/strictjson"
	"jobmaster/transport"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT, as shells report it
)

// usageError is a mistake in the command line: exit code 2, and a pointer
// to the command's help.
type usageError struct {
	cmdPath string
	msg     string
}

func (e *usageError) Error() string { return e.msg }

// usageErrorf returns a usageError for cmd.
func usageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{cmdPath: cmd.CommandPath(), msg: fmt.Sprintf(format, args...)}
}

// exitError ends the program with a given code. With a nil err nothing more
// is printed: the command has said what there was to say.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// report prints err (if any) the way the CLI reports errors and returns the
// exit code for it.
func report(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var exit *exitError
	if errors.As(err, &exit) && exit.err == nil {
		return exit.code
	}
	interrupted := errors.Is(err, context.Canceled)
	if interrupted && !errors.Is(err, client.ErrOutcomeUnknown) {
		fmt.Fprintln(stderr, "Error: interrupted")
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "Error: %s\n", printableLines(message(err)))
	if hint := hint(err); hint != "" {
		fmt.Fprintln(stderr, hint)
	}
	var usage *usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", usage.cmdPath)
		return exitUsage
	}
	if errors.As(err, &exit) {
		return exit.code
	}
	if interrupted {
		return exitInterrupted
	}
	return exitFailure
}

// message is the text printed after "Error: ".
func message(err error) string {
	if u, ok := errors.AsType[*client.UnreachableError](err); ok && u.NoLeader() {
		// Said once, the same way whatever the command: which masters know
		// no leader and which could not be reached.
		return noLeaderMessage(u)
	}
	return strings.TrimSpace(err.Error())
}

// noLeaderMessage says that the masters that answered know no leader, and
// what became of the others.
func noLeaderMessage(u *client.UnreachableError) string {
	var none []string
	others := map[string][]string{}
	var order []string
	for _, a := range u.Attempts {
		addr := transport.HostPort(a.Address)
		if apiErr, ok := errors.AsType[*client.APIError](a.Err); ok && apiErr.StatusCode == http.StatusServiceUnavailable {
			none = append(none, addr)
			continue
		}
		why := client.Describe(a.Err)
		if others[why] == nil {
			order = append(order, why)
		}
		others[why] = append(others[why], addr)
	}
	verb := "knows"
	if len(none) > 1 {
		verb = "know"
	}
	msg := fmt.Sprintf("the cluster has no leader: %s %s none", strings.Join(none, ", "), verb)
	for _, why := range order {
		msg += fmt.Sprintf("; %s: %s", strings.Join(others[why], ", "), why)
	}
	return msg
}

// hint suggests what to do about an error, or returns "".
func hint(err error) string {
	var unreachable *client.UnreachableError
	var apiErr *client.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized && strings.Contains(apiErr.Message, "no token exists yet"):
		return "This cluster's ACLs are not bootstrapped: 'jobmaster acl bootstrap' creates the\n" +
			"first management token and prints its secret, once."
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized:
		return "This cluster has ACLs on: give a token's secret with --token or " + tokenEnv + "\n" +
			"(a management token's holder makes one with 'jobmaster acl token create')."
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest && strings.Contains(apiErr.Message, "HTTP request to an HTTPS server"):
		return "The masters speak HTTPS: give their addresses as https://HOST:PORT, or give\n" +
			"the cluster's CA certificate with --ca-cert or " + caCertEnv + " (host:port then means\n" +
			"https; jobmaster dev's is ca.pem under its data directory's tls/)."
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusForbidden && strings.Contains(apiErr.Message, "permission denied"):
		return "The token's policy does not allow this: read reads, submit also submits and\n" +
			"cancels jobs, management does everything."
	case errors.As(err, &unreachable) && unreachable.NoLeader():
		return "A majority of the masters must run and reach each other to elect a leader\n" +
			"(2 of 3, 3 of 5). Reads work without one: add --stale (the answer may be\n" +
			"behind the last leader's). See docs/operations.md, \"No leader\"."
	case errors.As(err, &unreachable) && unreachable.Untrusted() && unreachable.RefusedCertificate():
		return "The masters refused this client's certificate: they require one their CA\n" +
			"signed. Give it with --client-cert and --client-key (or " + clientCertEnv + "\n" +
			"and " + clientKeyEnv + "); 'jobmaster tls cert create --role client' makes one."
	case errors.As(err, &unreachable) && unreachable.Untrusted():
		return "This client does not trust the masters' certificates: give the cluster's CA\n" +
			"certificate with --ca-cert or " + caCertEnv + " (jobmaster dev's is ca.pem under\n" +
			"its data directory's tls/)."
	case errors.As(err, &unreachable) && unreachable.NotMasters():
		return "Those are not masters' addresses: give --address (or JOBMASTER_ADDR) the\n" +
			"masters' HTTP addresses ('jobmaster members' lists them)."
	case errors.As(err, &unreachable) && unreachable.TimedOut():
		return "A master took the request but did not answer within --timeout: it may be\n" +
			"waiting for a leader (a majority of the masters must run), or be overloaded.\n" +
			"Reads work without a leader: add --stale. Or raise --timeout."
	case errors.As(err, &unreachable) && unreachable.NeverConnected():
		return "No master could even be connected to within --timeout: a --timeout too short\n" +
			"for a connection (raise it), or addresses that swallow connections (a firewall\n" +
			"dropping them; check --address or JOBMASTER_ADDR)."
	case errors.As(err, &unreachable):
		return "Is a cluster running? Start a local one with 'make run' or 'jobmaster dev',\n" +
			"or point --address or JOBMASTER_ADDR at its masters (a dev on other ports\n" +
			"than the default prints an export line that does)."
	case errors.Is(err, client.ErrOutcomeUnknown) && strings.Contains(err.Error(), "/v1/operator/snapshot"):
		return "The restore may or may not have happened: 'jobmaster members' shows a new\n" +
			"cluster id if it did."
	case errors.Is(err, client.ErrOutcomeUnknown):
		return "The job may have been created: check with 'jobmaster job list'.\n" +
			"Submit with --id ID to make retries safe."
	}
	return ""
}

// groupArgs rejects an unknown subcommand of a command group.
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	} else if group := pluralGroup(cmd, args[0]); group != "" {
		// jobmaster executor list: the role, for the group of commands.
		msg += fmt.Sprintf(" (did you mean '%s %s'?)", group, args[0])
	}
	return &usageError{cmdPath: cmd.CommandPath(), msg: msg}
}

// pluralGroup is the command path of cmd's plural sibling (executors for
// executor) if it has a subcommand named sub, else "".
func pluralGroup(cmd *cobra.Command, sub string) string {
	if !cmd.HasParent() {
		return ""
	}
	for _, c := range cmd.Parent().Commands() {
		if c.Name() != cmd.Name()+"s" {
			continue
		}
		for _, s := range c.Commands() {
			if s.Name() == sub || slices.Contains(s.Aliases, sub) {
				return c.CommandPath()
			}
		}
	}
	return ""
}

// flagSuggestion is " (did you mean --node-id?)" for an unknown flag that
// is close to one cmd takes (a letter or a dash off), else "".
func flagSuggestion(cmd *cobra.Command, err error) string {
	const prefix = "unknown flag: --"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return ""
	}
	given := strings.TrimPrefix(msg, prefix)
	best, bestDist := "", 3
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := strictjson.EditDistance(strings.ReplaceAll(given, "-", ""), strings.ReplaceAll(f.Name, "-", ""))
		if strings.ReplaceAll(given, "_", "-") == f.Name {
			d = 0
		}
		if d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean --%s?)", best)
}

// runGroup runs a command group without a subcommand: it shows the usage on
// stderr and fails as a usage error.
func runGroup(cmd *cobra.Command, args []string) error {
	fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
	return &exitError{code: exitUsage}
}

// exactArgs requires one positional argument per name.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			for i, a := range args {
				if a == "" {
					return usageErrorf(cmd, "%s must not be empty", names[i])
				}
			}
			return nil
		}
		if len(names) == 0 {
			return usageErrorf(cmd, "%q takes no arguments, got %d (%s)", cmd.CommandPath(), len(args), strings.Join(args, " "))
		}
		noun := "arguments"
		if len(names) == 1 {
			noun = "argument"
		}
		return usageErrorf(cmd, "%q takes %d %s (%s), got %d", cmd.CommandPath(), len(names), noun, strings.Join(names, " "), len(args))
	}
}
