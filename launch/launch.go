// Package launch owns the command lines of `jobmaster server` and `jobmaster
// executor`: the flag table of each role, registered once, and the argv that
// starts a node, rendered from that same table.
//
// Vocabulary:
//   - options: a role's settings as its command line carries them (Server,
//     Executor): the role's Config plus what only the command line has (the
//     log level, extra raw arguments).
//   - registration: ServerFlags and ExecutorFlags bind every flag of a role
//     to the fields of its options. The binary registers its flags with them;
//     there is no other list of flags.
//   - default: the value a flag has when it is not given. DefaultServer and
//     DefaultExecutor are options with every flag at its default; start from
//     them, since a zero value is not the defaults (a zero --job-retention
//     keeps ended jobs forever).
//   - argv: what Args renders: the role's command, then --name=value for
//     every flag whose value differs from its default, in registration order,
//     then Extra. A flag at its default is left out, so the process takes the
//     binary's own default.
//
// A new flag is one edit: its line in ServerFlags or ExecutorFlags. Only the
// fields a flag is bound to reach the process; the rest of a Config (Logger,
// Now, ...) is for the process itself to fill in.
package launch

import (
	"strings"

	"github.com/spf13/pflag"

	"jobmaster/placement"
	"jobmaster/transport"
)

// securityFlags registers the flags of TLS, gossip encryption and
// --insecure, which both roles take (docs/security.md).
func securityFlags(fs *pflag.FlagSet, tls *transport.TLSFiles, keys *[]string, keyring *string, insecure *bool) {
	fs.StringVar(&tls.CA, "tls-ca", "", "PEM file of the CA certificates to trust (with --tls-cert and --tls-key: TLS on every port; reread on SIGHUP)")
	fs.StringVar(&tls.Cert, "tls-cert", "", "PEM file of this node's certificate, from 'jobmaster tls cert create' (reread on SIGHUP)")
	fs.StringVar(&tls.Key, "tls-key", "", "PEM file of this node's private key (reread on SIGHUP)")
	fs.Var(newListValue(keys, nil), "gossip-key", "comma-separated base64 gossip encryption keys, the first used and the others accepted ('jobmaster operator gossip keygen' makes one; the process list shows them: prefer --gossip-keyring)")
	fs.StringVar(keyring, "gossip-keyring", "", "file of gossip keys, one per line, the first used and the others accepted; reread on SIGHUP (instead of --gossip-key)")
	fs.BoolVar(insecure, "insecure", false, "start even when listening beyond loopback without TLS, a gossip key or (masters) ACLs")
}

// render is the argv of command for the options o: register binds a scratch
// FlagSet to a fresh options value, which takes the defaults (and so every
// flag's DefValue); the fresh value is then overwritten with o, so that each
// flag's Value reads o's field. Every flag whose value differs from its
// default is emitted as one argument, --name=value, which holds for values
// that start with "-" and for boolean flags alike.
func render[T any](command string, o T, register func(*pflag.FlagSet, *T), extra []string) []string {
	fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
	fs.SortFlags = false // VisitAll in registration order
	bound := new(T)
	register(fs, bound)
	*bound = o
	args := []string{command}
	fs.VisitAll(func(f *pflag.Flag) {
		if v := f.Value.String(); v != f.DefValue {
			args = append(args, "--"+f.Name+"="+v)
		}
	})
	return append(args, extra...)
}

// policyValue is a placement policy flag (placement.ParsePolicy).
type policyValue struct{ p *placement.Policy }

func (v policyValue) Set(s string) error {
	p, err := placement.ParsePolicy(s)
	if err != nil {
		return err
	}
	*v.p = p
	return nil
}

func (v policyValue) String() string {
	if v.p == nil {
		return placement.Spread.String()
	}
	return v.p.String()
}

func (v policyValue) Type() string { return "policy" }

// listValue is a comma-separated list flag bound to a []string (--join).
// Spaces around items and empty items are dropped; the last occurrence of
// the flag wins. Its help shows it as a string, as a string flag's does.
type listValue struct{ p *[]string }

func newListValue(p *[]string, def []string) *listValue {
	*p = def
	return &listValue{p: p}
}

func (l *listValue) Set(s string) error {
	*l.p = splitList(s)
	return nil
}

func (l *listValue) String() string { return strings.Join(*l.p, ",") }

func (l *listValue) Type() string { return "string" }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
