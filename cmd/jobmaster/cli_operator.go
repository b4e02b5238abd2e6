package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"jobmaster/client"

	"jobmaster/api"
)

// snapshotSaved is what operator snapshot save --json prints.
type snapshotSaved struct {
	File  string `json:"file"`
	Bytes int    `json:"bytes"`
	Index uint64 `json:"index"`
}

// newOperatorCmd builds `jobmaster operator`: backups, master membership
// and gossip keys.
func newOperatorCmd(env *cliEnv) *cobra.Command {
	o := &clientOpts{env: env}
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Back up and restore the state; list and remove masters; make gossip keys",
		Args:  groupArgs,
		RunE:  runGroup,
	}
	addClientFlags(cmd, o)
	var force, resetACL bool
	snap := &cobra.Command{Use: "snapshot", Short: "Save or restore the replicated state", Args: groupArgs, RunE: runGroup}
	save := &cobra.Command{
		Use:   "save FILE",
		Short: "Save the replicated state to FILE (a backup; - for standard output)",
		Args:  exactArgs("FILE"),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			// "-" and /dev/stdout are standard output, whatever it is
			// redirected to; what is said of the save goes to standard
			// error then, not into the backup.
			toStdout := args[0] == "-" || args[0] == "/dev/stdout"
			st, statErr := os.Stat(args[0])
			if !toStdout && statErr == nil && st.IsDir() {
				return fmt.Errorf("%s is a directory: give a file to save the snapshot to", args[0])
			}
			stream := !toStdout && statErr == nil && !st.Mode().IsRegular() // a pipe, a device: written as it is
			if !toStdout {
				if statErr == nil && !stream && !force {
					return fmt.Errorf("%s exists: give another file, or --force to replace it", args[0])
				}
				if dir := filepath.Dir(args[0]); statErr != nil {
					if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
						return fmt.Errorf("cannot save to %s: directory %s does not exist", args[0], dir)
					}
				}
			}
			data, index, err := c.Snapshot(cmd.Context())
			if err != nil {
				return err
			}
			say := cmd.OutOrStdout()
			switch {
			case toStdout:
				say = cmd.ErrOrStderr()
				_, err = cmd.OutOrStdout().Write(data)
			case stream:
				say = cmd.ErrOrStderr()
				err = os.WriteFile(args[0], data, 0o600)
			default:
				err = writeFileAtomic(args[0], data, 0o600)
			}
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(say, snapshotSaved{File: args[0], Bytes: len(data), Index: index})
			}
			to := args[0]
			if to == "-" {
				to = "standard output"
			}
			fmt.Fprintf(say, "Saved %d bytes to %s (the state at index %d)\n", len(data), to, index)
			return nil
		}),
	}
	o.staleFlag(save)
	save.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	restore := &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the cluster's state with a snapshot saved earlier (disaster recovery; - reads standard input)",
		Long: `Replace the cluster's whole state with a snapshot saved by 'operator snapshot
save' (FILE, or - for standard input). Jobs submitted since the snapshot are gone; executors are reconciled
against the restored state (tasks it does not expect are cancelled, tasks it
expects but no executor runs are failed and restarted).`,
		Args: exactArgs("FILE"),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				var f *os.File
				if f, err = openInput(args[0], "snapshot"); err == nil {
					data, err = io.ReadAll(f)
					f.Close()
				}
			}
			if err != nil {
				return err
			}
			if len(data) == 0 {
				return fmt.Errorf("%s is empty: no snapshot to restore", args[0])
			}
			if snap, line, ok := savedLineAfter(data); ok {
				fmt.Fprintf(cmd.ErrOrStderr(), "Note: %s ends with the line %q, which an older 'snapshot save' to standard output wrote into the backup; restoring the %d bytes before it.\n", args[0], line, len(snap))
				data = snap
			}
			res, err := c.SnapshotRestoreWith(cmd.Context(), data, client.RestoreOptions{ResetACL: resetACL})
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"restored": true, "file": args[0], "jobs": res.Jobs, "executions": res.Executions})
			}
			from := args[0]
			if from == "-" {
				from = "standard input"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Restored the state from %s: %d jobs, %d executions\n", from, res.Jobs, res.Executions)
			// The ACL tokens are the backup's now: say so to a caller
			// whose own token was not among them, before its next
			// command is a bare 401; or, when the backup had none (the
			// masters say so), that the ACLs may be bootstrapped.
			if res.ACLReset {
				fmt.Fprintln(cmd.ErrOrStderr(), "Note: the backup holds no ACL token: the ACLs may be bootstrapped again, by anyone who\n"+
					"reaches the cluster. Run 'jobmaster acl bootstrap' now.")
				return nil
			}
			var apiErr *client.APIError
			if _, err := c.Cluster(cmd.Context()); errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized {
				fmt.Fprintln(cmd.ErrOrStderr(), "Note: the ACL tokens are now the backup's, and the token this command used is not\n"+
					"among them: use a token of the backup's cluster from now on (the web UI's too).")
			}
			return nil
		}),
	}
	restore.Flags().BoolVar(&resetACL, "reset-acl", false, "restore a snapshot taken before the ACL bootstrap into a cluster bootstrapped since: its ACLs may then be bootstrapped again (run 'acl bootstrap' at once)")
	snap.AddCommand(save, restore)
	rft := &cobra.Command{Use: "raft", Short: "List or remove the masters of the Raft configuration", Args: groupArgs, RunE: runGroup}
	list := &cobra.Command{
		Use:   "list-peers",
		Short: "List the masters of the Raft configuration",
		Args:  exactArgs(),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			peers, err := c.RaftPeers(cmd.Context())
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), api.RaftPeers{Peers: peers})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tADDRESS\tVOTER\tLEADER")
			for _, p := range peers {
				fmt.Fprintf(tw, "%s\t%s\t%t\t%t\n", p.ID, p.Address, p.Voter, p.Leader)
			}
			return tw.Flush()
		}),
	}
	o.staleFlag(list)
	rft.AddCommand(list, &cobra.Command{
		Use:   "remove-peer ID",
		Short: "Remove a master that is gone for good from the Raft configuration",
		Args:  exactArgs("ID"),
		RunE: o.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			if err := c.RemovePeer(cmd.Context(), args[0]); err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), map[string]string{"removed": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Removed %s from the Raft configuration\n", args[0])
			return nil
		}),
	})
	cmd.AddCommand(snap, rft, newGossipCmd(o))
	return cmd
}

// savedLine is the line 'operator snapshot save' printed; before standard
// output was written as a stream, a save to it put the line (or, with
// --json, its JSON) right after the snapshot's bytes.
var savedLine = regexp.MustCompile(`\ASaved ([0-9]+) bytes to [^\n]*\n\z`)

// savedLineAfter finds such a line at the end of data, naming the count of
// the bytes before it exactly, and returns those bytes and the line. The
// snapshot is binary: the line is looked for at each "Saved " or "{" from
// the end.
func savedLineAfter(data []byte) ([]byte, string, bool) {
	if len(data) < 2 || data[len(data)-1] != '\n' {
		return nil, "", false
	}
	for i := bytes.LastIndex(data, []byte("Saved ")); i > 0; i = bytes.LastIndex(data[:i], []byte("Saved ")) {
		if m := savedLine.FindSubmatch(data[i:]); m != nil {
			if n, err := strconv.Atoi(string(m[1])); err == nil && n == i {
				return data[:i], strings.TrimSuffix(string(data[i:]), "\n"), true
			}
		}
	}
	// The --json answer: an object naming the file, the bytes and the index.
	for i := bytes.LastIndexByte(data, '{'); i > 0 && len(data)-i <= 64<<10; i = bytes.LastIndexByte(data[:i], '{') {
		var saved snapshotSaved
		dec := json.NewDecoder(bytes.NewReader(data[i:]))
		dec.DisallowUnknownFields()
		if dec.Decode(&saved) != nil || saved.Bytes != i || saved.File == "" {
			continue
		}
		if len(bytes.TrimSpace(data[i+int(dec.InputOffset()):])) == 0 {
			return data[:i], oneLine(strings.TrimSpace(string(data[i:]))), true
		}
	}
	return nil, "", false
}

// writeFileAtomic writes data to path through a file beside it, synced and
// then renamed over path (the file a symbolic link names, for a link), the
// directory synced after: a backup is either the old one or the new one,
// whole, whatever stops the write.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // once renamed, there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
