package master

import (
	"errors"
	"fmt"
	"io"
	"jobmaster/leader"
	"jobmaster/membership"
	"jobmaster/placement"
	"jobmaster/transport"
	"jobmaster/wire"
	"log/slog"
	"os"
	"time"
)

// Config configures a master. Zero durations take the documented defaults
// (docs/configuration.md).
type Config struct {
	NodeID     string
	DataDir    string
	HTTPAddr   string // listen host:port for the HTTP API
	RaftAddr   string // host:port for Raft's TCP transport
	GossipAddr string // host:port for memberlist
	// Join lists gossip addresses of other masters.
	Join []string
	// BootstrapExpect: form a new cluster once this many masters (this one
	// included) are seen in gossip and none already belongs to a cluster.
	// 0: never bootstrap; wait to be added to an existing cluster.
	BootstrapExpect int

	// Raft timing. About 250 ms holds on a loaded 2-core machine; 100 ms
	// caused spurious elections there.
	RaftHeartbeatTimeout time.Duration
	RaftElectionTimeout  time.Duration

	// ExecutorHeartbeat is how often the leader heartbeats each executor.
	ExecutorHeartbeat time.Duration
	// ExecutorTimeout is how long an executor may leave heartbeats
	// unanswered before it is lost and its executions are failed. It must be
	// at least the executors' lease plus the heartbeat request timeout plus
	// two heartbeat intervals (minExecutorTimeout), so a lost executor has
	// stopped its tasks before their replacements start.
	ExecutorTimeout time.Duration
	// ExecutorLease is the executors' self-fencing lease (their --lease); the
	// master checks the timing relation against it.
	ExecutorLease time.Duration
	// DeployTimeout is how long a deployment may stay unacknowledged before
	// it is failed.
	DeployTimeout time.Duration
	// DeployRPCTimeout and CancelRPCTimeout bound a deploy and a cancel
	// request to an executor; neither may exceed wire.MaxRequestTimeout,
	// which executors rely on.
	DeployRPCTimeout time.Duration
	CancelRPCTimeout time.Duration
	// JobRetention is how long an ended job is kept before it is forgotten
	// (and its id may be used again); 0 keeps ended jobs forever.
	JobRetention time.Duration
	// MinRestartDelay is the least time between a job's failure and its
	// restart, whatever its restart strategy says (0: none).
	MinRestartDelay time.Duration
	// Placement is how the leader chooses executors for new slots
	// (--placement: spread, the default, or pack).
	Placement placement.Policy
	// DeadMasterCleanup, when positive, has the leader remove from the Raft
	// configuration a master lost for longer than this (gossip says it
	// failed, or no longer knows it), never below the quorum of the
	// configured size (--bootstrap-expect, or the configuration's size when
	// the leader took over). 0 (the default): masters are removed by hand.
	DeadMasterCleanup time.Duration
	// StagingStable is how long a master added to the cluster stays a
	// non-voter with its log caught up before it becomes a voter (0:
	// defaultStagingStable; staging.go).
	StagingStable time.Duration
	// RequestWait is how long an API request waits for a leader during an
	// election before answering 503.
	RequestWait time.Duration
	// EventBuffer is how many events the master keeps for its event stream
	// (0: fsm.DefaultEventBuffer), and EventHeartbeat how often an idle
	// stream gets a heartbeat line (0: DefaultEventHeartbeat).
	EventBuffer    int
	EventHeartbeat time.Duration

	// Security (tls.go, docs/security.md). TLS names the master's CA,
	// certificate and key (--tls-ca, --tls-cert, --tls-key: all three or
	// none); the certificate must be a server's for NodeID.
	TLS transport.TLSFiles
	// GossipKeys (--gossip-key, the first used) or GossipKeyring (a file
	// of keys, read again on Reload) encrypt gossip.
	GossipKeys    []string
	GossipKeyring string
	// ACL is --acl: every request but a few (acl.Routes) needs a token
	// whose policy allows it (acl.go).
	ACL bool
	// Insecure lets a master listening beyond loopback start without TLS,
	// a gossip key or ACLs (with a warning).
	Insecure bool

	// Bounds (docs/security.md). MaxJobs, MaxExecutions and MaxSpecBytes
	// are quotas on the state, checked by the leader before it proposes a
	// submit (0: no quota). MaxSnapshotBytes bounds a restore's body (0: the default).
	// MaxConnsPerClient bounds the HTTP connections one client address may
	// hold (0: the default; negative: no bound).
	MaxJobs           int
	MaxExecutions     int
	MaxSpecBytes      int64
	MaxSnapshotBytes  int64
	MaxConnsPerClient int

	Logger *slog.Logger
	// RaftLog receives hashicorp/raft's own log (default: stderr), at
	// RaftLogLevel (default "warn").
	RaftLog      io.Writer
	RaftLogLevel string
	// RaftLogJSON writes Raft's log as JSON lines (--log-format json).
	RaftLogJSON bool
	// Now is the clock; tests inject their own.
	Now func() time.Time
	// GossipTimings, when set, replaces gossip's timings
	// (membership.Config.Slow); only tests set it.
	GossipTimings *membership.Timings
	// beforeRestore, when set, is called by a snapshot restore between
	// its announcement and Raft's restore; only tests set it.
	beforeRestore func()
}

// Defaults.
const (
	DefaultRaftTimeout       = 250 * time.Millisecond
	DefaultExecutorHeartbeat = time.Second
	// MinExecutorHeartbeat bounds --executor-heartbeat from below.
	MinExecutorHeartbeat    = 10 * time.Millisecond
	DefaultExecutorLease    = wire.DefaultLease
	DefaultExecutorTimeout  = 15 * time.Second
	DefaultDeployTimeout    = 10 * time.Second
	DefaultRequestWait      = 5 * time.Second
	DefaultJobRetention     = 24 * time.Hour
	DefaultMinRestartDelay  = time.Second
	DefaultDeployRPCTimeout = wire.MaxRequestTimeout
	DefaultCancelRPCTimeout = 5 * time.Second
	DefaultEventHeartbeat   = 10 * time.Second
	DefaultMaxJobs          = 100_000
	DefaultMaxExecutions    = 2_000_000
	DefaultMaxSpecBytes     = 512 << 20
	DefaultMaxSnapshotBytes = 1 << 30
)

// leaderConfig is the leader core's timing.
func (c *Config) leaderConfig() leader.Config {
	return leader.Config{Heartbeat: c.ExecutorHeartbeat, Timeout: c.ExecutorTimeout, Lease: c.ExecutorLease,
		RPCTimeout: c.heartbeatRPCTimeout(), AckDeadline: c.DeployTimeout, MinRestartDelay: c.MinRestartDelay, Placement: c.Placement}
}

// minExecutorTimeout is the shortest executor timeout that is safe with
// executors whose lease is lease (leader.Config.MinTimeout).
func (c *Config) minExecutorTimeout(lease time.Duration) time.Duration {
	return c.leaderConfig().MinTimeout(lease)
}

// heartbeatRPCTimeout bounds one heartbeat request. A heartbeat the
// executor received renews its lease at most this long after it was sent,
// which is why the executor timeout must exceed the lease by this much.
func (c *Config) heartbeatRPCTimeout() time.Duration {
	return leader.HeartbeatRPCTimeout(c.ExecutorHeartbeat)
}

func (c *Config) setDefaults() error {
	if c.NodeID == "" {
		return errors.New("--node-id is required")
	}
	if c.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	for _, a := range []struct{ name, v string }{{"--http-addr", c.HTTPAddr}, {"--raft-addr", c.RaftAddr}, {"--gossip-addr", c.GossipAddr}} {
		if a.v == "" {
			return fmt.Errorf("%s is required", a.name)
		}
	}
	if c.BootstrapExpect < 0 {
		return errors.New("--bootstrap-expect must not be negative")
	}
	for _, q := range []struct {
		name string
		v    int64
	}{{"--max-jobs", int64(c.MaxJobs)}, {"--max-executions", int64(c.MaxExecutions)}, {"--max-spec-bytes", c.MaxSpecBytes}, {"--max-snapshot-bytes", c.MaxSnapshotBytes}} {
		if q.v < 0 {
			return fmt.Errorf("%s must not be negative (it is %d)", q.name, q.v)
		}
	}
	if c.MaxSnapshotBytes == 0 {
		c.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--raft-heartbeat-timeout", c.RaftHeartbeatTimeout}, {"--raft-election-timeout", c.RaftElectionTimeout},
		{"--executor-heartbeat", c.ExecutorHeartbeat}, {"--executor-lease", c.ExecutorLease},
		{"--executor-timeout", c.ExecutorTimeout}, {"--deploy-timeout", c.DeployTimeout},
		{"--job-retention", c.JobRetention}, {"--min-restart-delay", c.MinRestartDelay}, {"RequestWait", c.RequestWait}, {"--dead-master-cleanup", c.DeadMasterCleanup},
		{"DeployRPCTimeout", c.DeployRPCTimeout}, {"CancelRPCTimeout", c.CancelRPCTimeout},
	} {
		if d.v < 0 {
			zero := "0 means the default"
			switch d.name {
			case "--job-retention":
				zero = "0 keeps ended jobs forever"
			case "--min-restart-delay":
				zero = "0 sets no minimum"
			case "--dead-master-cleanup":
				zero = "0 turns it off"
			}
			return fmt.Errorf("%s must not be negative (it is %s; %s)", d.name, d.v, zero)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.RaftHeartbeatTimeout, DefaultRaftTimeout)
	def(&c.RaftElectionTimeout, DefaultRaftTimeout)
	def(&c.ExecutorHeartbeat, DefaultExecutorHeartbeat)
	def(&c.ExecutorLease, DefaultExecutorLease)
	def(&c.ExecutorTimeout, DefaultExecutorTimeout)
	def(&c.DeployTimeout, DefaultDeployTimeout)
	def(&c.RequestWait, DefaultRequestWait)
	def(&c.DeployRPCTimeout, DefaultDeployRPCTimeout)
	def(&c.CancelRPCTimeout, DefaultCancelRPCTimeout)
	def(&c.EventHeartbeat, DefaultEventHeartbeat)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DeployRPCTimeout", c.DeployRPCTimeout}, {"CancelRPCTimeout", c.CancelRPCTimeout}} {
		if d.v > wire.MaxRequestTimeout {
			return fmt.Errorf("%s (%s) must not exceed %s: executors remember forgotten executions for a time derived from it", d.name, d.v, wire.MaxRequestTimeout)
		}
	}
	if c.ExecutorHeartbeat < MinExecutorHeartbeat {
		return fmt.Errorf("--executor-heartbeat (%s) must be at least %s: the leader heartbeats every executor that often", c.ExecutorHeartbeat, MinExecutorHeartbeat)
	}
	if c.RaftElectionTimeout < c.RaftHeartbeatTimeout {
		return fmt.Errorf("--raft-election-timeout (%s) must be at least --raft-heartbeat-timeout (%s)", c.RaftElectionTimeout, c.RaftHeartbeatTimeout)
	}
	if need := c.minExecutorTimeout(c.ExecutorLease); c.ExecutorTimeout < need {
		return fmt.Errorf("--executor-timeout (%s) must be at least %s: the executor lease (%s), plus the heartbeat request timeout (%s), plus two heartbeat intervals (%s) in which heartbeats may renew the lease; otherwise a lost executor may still run a task when its replacement starts, or healthy executors stop being renewed",
			c.ExecutorTimeout, need, c.ExecutorLease, c.heartbeatRPCTimeout(), 2*c.ExecutorHeartbeat)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RaftLog == nil {
		c.RaftLog = os.Stderr
	}
	if c.RaftLogLevel == "" {
		c.RaftLogLevel = "warn"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.StagingStable <= 0 {
		c.StagingStable = defaultStagingStable
	}
	return nil
}
