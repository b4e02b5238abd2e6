package launch

import (
	"errors"
	"github.com/spf13/pflag"

	"jobmaster/master"
	"jobmaster/transport"
)

// ServerCommand is the command that runs a master.
const ServerCommand = "server"

// Server is the options of `jobmaster server`.
type Server struct {
	master.Config
	// LogLevel is --log-level: debug, info, warn or error; LogFormat is
	// --log-format: text or json.
	LogLevel  string
	LogFormat string
	// Extra is appended to the argv as it is, after every registered flag
	// (a later occurrence of a flag wins).
	Extra []string
}

// ServerFlags registers every flag of `jobmaster server` on fs, bound to o's
// fields, and sets those fields to their defaults.
func ServerFlags(fs *pflag.FlagSet, o *Server) {
	c := &o.Config
	fs.StringVar(&c.NodeID, "node-id", "", "unique name of this master (required)")
	fs.StringVar(&c.DataDir, "data-dir", "", "directory for the Raft log, snapshots and state (required)")
	fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:7401", "host:port of the HTTP API")
	fs.StringVar(&c.RaftAddr, "raft-addr", "127.0.0.1:7411", "host:port for Raft traffic between masters")
	fs.StringVar(&c.GossipAddr, "gossip-addr", "127.0.0.1:7421", "host:port for gossip (TCP and UDP)")
	fs.Var(newListValue(&c.Join, nil), "join", "comma-separated gossip addresses of other masters")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many masters are seen (0: only join an existing one)")
	fs.DurationVar(&c.RaftHeartbeatTimeout, "raft-heartbeat-timeout", master.DefaultRaftTimeout, "Raft heartbeat timeout")
	fs.DurationVar(&c.RaftElectionTimeout, "raft-election-timeout", master.DefaultRaftTimeout, "Raft election timeout")
	fs.DurationVar(&c.ExecutorHeartbeat, "executor-heartbeat", master.DefaultExecutorHeartbeat, "interval of the leader's heartbeats to each executor")
	fs.DurationVar(&c.ExecutorTimeout, "executor-timeout", master.DefaultExecutorTimeout, "silence after which an executor is lost and its executions are failed")
	fs.DurationVar(&c.ExecutorLease, "executor-lease", master.DefaultExecutorLease, "the executors' --lease (checked against --executor-timeout)")
	fs.DurationVar(&c.DeployTimeout, "deploy-timeout", master.DefaultDeployTimeout, "how long a deployment may stay unacknowledged before it fails")
	fs.DurationVar(&c.MinRestartDelay, "min-restart-delay", master.DefaultMinRestartDelay, "the least time between a job's failure and its restart, whatever its restart strategy's delay (0: no minimum)")
	fs.Var(policyValue{&c.Placement}, "placement", "how the leader chooses executors for new slots: spread (the one with the most free slots: work spreads over the executors) or pack (the one with the fewest free slots that has one: executors fill one after another)")
	fs.DurationVar(&c.DeadMasterCleanup, "dead-master-cleanup", 0, "remove from the Raft configuration a master lost this long, never below the quorum of --bootstrap-expect (0: off)")
	fs.DurationVar(&c.JobRetention, "job-retention", master.DefaultJobRetention, "forget a job this long after it ended (0: keep ended jobs forever)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", "text", "text (key=value) or json (one object per line), on stderr")
	fs.StringVar(&c.RaftLogLevel, "raft-log-level", "warn", "log level of the Raft library")
	securityFlags(fs, &c.TLS, &c.GossipKeys, &c.GossipKeyring, &c.Insecure)
	fs.BoolVar(&c.ACL, "acl", false, "turn ACLs on: every request but GET /v1/health and the bootstrap needs a token whose policy allows it ('jobmaster acl bootstrap')")
	fs.IntVar(&c.MaxJobs, "max-jobs", master.DefaultMaxJobs, "quota: the most jobs the state holds, ended ones not yet forgotten included; a submit beyond it gets 429 (0: no quota)")
	fs.IntVar(&c.MaxExecutions, "max-executions", master.DefaultMaxExecutions, "quota: the most executions (attempts of subtasks) the state holds; a submit that would pass it gets 429 (0: no quota)")
	fs.Int64Var(&c.MaxSpecBytes, "max-spec-bytes", master.DefaultMaxSpecBytes, "quota: the most bytes the state's job specs may take in a master's memory (each spec's strings, plus a fixed weight for each vertex, argument, env variable and input), ended jobs not yet forgotten included; a submit that would pass it gets 429 (0: no quota)")
	fs.Int64Var(&c.MaxSnapshotBytes, "max-snapshot-bytes", master.DefaultMaxSnapshotBytes, "the largest snapshot a restore takes; a larger body gets 413")
	fs.IntVar(&c.MaxConnsPerClient, "http-max-conns-per-client", transport.DefaultMaxConnsPerClient, "the most HTTP connections one client address may hold open (loopback is not counted, nor with TLS a master's or an executor's; -1: no bound)")
}

// DefaultServer is the options of a master started with no flags.
func DefaultServer() Server {
	var o Server
	ServerFlags(pflag.NewFlagSet(ServerCommand, pflag.ContinueOnError), &o)
	return o
}

// Check refuses flag values that mean nothing an operator could want (the
// master's configuration takes 0 for "the default").
func (o *Server) Check() error {
	return errors.Join(checkMaxConns(o.MaxConnsPerClient), checkJoin(o.Join))
}

// Args is the argv (without the binary) that starts a master with o.
func (o Server) Args() []string { return render(ServerCommand, o, ServerFlags, o.Extra) }
