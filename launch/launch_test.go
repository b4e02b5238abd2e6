package launch

import (
	"strconv"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parse reads argv back with the real registration, as the binary does.
func parse[T any](t *testing.T, command string, register func(*pflag.FlagSet, *T), argv []string) T {
	t.Helper()
	require.NotEmpty(t, argv)
	require.Equal(t, command, argv[0])
	var o T
	fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
	register(fs, &o)
	require.NoError(t, fs.Parse(argv[1:]), "%q", argv)
	require.Empty(t, fs.Args(), "positional arguments in %q", argv)
	return o
}

func TestDefaultsRenderNoFlags(t *testing.T) {
	assert.Equal(t, []string{"server"}, DefaultServer().Args())
	assert.Equal(t, []string{"executor"}, DefaultExecutor().Args())
}

func TestServerRoundTrip(t *testing.T) {
	o := DefaultServer()
	o.NodeID, o.DataDir = "m1", "/tmp/data dir/m1"
	o.HTTPAddr, o.RaftAddr, o.GossipAddr = "127.0.0.1:9001", "127.0.0.1:9011", "127.0.0.1:9021"
	o.Join = []string{"127.0.0.1:9021", "127.0.0.1:9022", "127.0.0.1:9023"}
	o.BootstrapExpect = 3
	o.RaftHeartbeatTimeout, o.RaftElectionTimeout = 300*time.Millisecond, 400*time.Millisecond
	o.ExecutorHeartbeat, o.ExecutorTimeout, o.ExecutorLease = 200*time.Millisecond, 4500*time.Millisecond, 3*time.Second
	o.DeployTimeout = -time.Second // refused by the master, but carried as given
	o.JobRetention = 0             // keep forever: not the default, so it is rendered
	o.LogLevel, o.RaftLogLevel, o.LogFormat = "debug", "off", "json"

	argv := o.Args()
	assert.Equal(t, []string{"server",
		"--node-id=m1", "--data-dir=/tmp/data dir/m1",
		"--http-addr=127.0.0.1:9001", "--raft-addr=127.0.0.1:9011", "--gossip-addr=127.0.0.1:9021",
		"--join=127.0.0.1:9021,127.0.0.1:9022,127.0.0.1:9023", "--bootstrap-expect=3",
		"--raft-heartbeat-timeout=300ms", "--raft-election-timeout=400ms",
		"--executor-heartbeat=200ms", "--executor-timeout=4.5s", "--executor-lease=3s",
		"--deploy-timeout=-1s", "--job-retention=0s", "--log-level=debug", "--log-format=json", "--raft-log-level=off",
	}, argv)
	assert.Equal(t, o, parse(t, ServerCommand, ServerFlags, argv))
}

func TestExecutorRoundTrip(t *testing.T) {
	o := DefaultExecutor()
	o.NodeID, o.DataDir = "e1", "/tmp/e1"
	o.HTTPAddr, o.GossipAddr = "127.0.0.1:9031", "127.0.0.1:9041"
	o.Join = []string{"127.0.0.1:9021", "127.0.0.1:9022"}
	o.Slots, o.Runtime = 8, "sim"
	o.Lease, o.CancelGrace = 3*time.Second, 500*time.Millisecond
	o.FetchTimeout = 5 * time.Second
	o.LogLevel, o.LogFormat = "warn", "json"

	argv := o.Args()
	assert.Equal(t, []string{"executor",
		"--node-id=e1", "--data-dir=/tmp/e1", "--http-addr=127.0.0.1:9031", "--gossip-addr=127.0.0.1:9041",
		"--join=127.0.0.1:9021,127.0.0.1:9022", "--slots=8", "--runtime=sim",
		"--lease=3s", "--cancel-grace=500ms", "--fetch-timeout=5s", "--log-level=warn", "--log-format=json",
	}, argv)
	assert.Equal(t, o, parse(t, ExecutorCommand, ExecutorFlags, argv))
}

func TestExtraComesLastAndWins(t *testing.T) {
	o := DefaultExecutor()
	o.NodeID = "e1"
	o.LogLevel = "warn"
	o.Extra = []string{"--log-level", "debug"}
	argv := o.Args()
	assert.Equal(t, []string{"executor", "--node-id=e1", "--log-level=warn", "--log-level", "debug"}, argv)
	got := parse(t, ExecutorCommand, ExecutorFlags, argv)
	assert.Equal(t, "debug", got.LogLevel)
}

func TestJoinListLikeBefore(t *testing.T) {
	got := parse(t, ServerCommand, ServerFlags, []string{"server", "--join", " a:1, ,b:2,", "--join=c:3,d:4"})
	assert.Equal(t, []string{"c:3", "d:4"}, got.Join, "the last --join wins; blanks are dropped")
	got = parse(t, ServerCommand, ServerFlags, []string{"server", "--join="})
	assert.Nil(t, got.Join)
}

// TestEveryFlagRenders changes each registered flag alone, as a user would on
// the command line, and checks that Args carries it and that the argv parses
// back to the same options. It fails for a flag bound to anything but the
// options' fields (Args could not see it), for a value that does not survive
// String and Set, and for a flag of a type vary does not know yet.
func TestEveryFlagRenders(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		everyFlagRenders(t, ServerCommand, ServerFlags, Server.Args)
	})
	t.Run("executor", func(t *testing.T) {
		everyFlagRenders(t, ExecutorCommand, ExecutorFlags, Executor.Args)
	})
}

func everyFlagRenders[T any](t *testing.T, command string, register func(*pflag.FlagSet, *T), args func(T) []string) {
	var names []string
	var scratch T
	probe := pflag.NewFlagSet(command, pflag.ContinueOnError)
	register(probe, &scratch)
	probe.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	require.NotEmpty(t, names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			var o T
			fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
			register(fs, &o)
			f := fs.Lookup(name)
			require.NoError(t, fs.Set(name, vary(t, f)))
			want := "--" + name + "=" + f.Value.String()
			argv := args(o)
			assert.Equal(t, []string{command, want}, argv)
			assert.Equal(t, o, parse(t, command, register, argv))
		})
	}
}

// vary is a value of f other than its default.
func vary(t *testing.T, f *pflag.Flag) string {
	t.Helper()
	switch f.Value.Type() {
	case "string":
		return f.DefValue + "x,y"
	case "int", "int64":
		n, err := strconv.ParseInt(f.DefValue, 10, 64)
		require.NoError(t, err)
		return strconv.FormatInt(n+3, 10)
	case "size":
		n, err := ParseSize(f.DefValue)
		require.NoError(t, err)
		return strconv.FormatInt(n+2, 10) + "MiB"
	case "duration":
		d, err := time.ParseDuration(f.DefValue)
		require.NoError(t, err)
		return (d + 1500*time.Millisecond).String()
	case "policy":
		if f.DefValue == "spread" {
			return "pack"
		}
		return "spread"
	case "bool":
		b, err := strconv.ParseBool(f.DefValue)
		require.NoError(t, err)
		return strconv.FormatBool(!b)
	}
	t.Fatalf("--%s is of type %q: teach vary a value for it", f.Name, f.Value.Type())
	return ""
}

// Flag values the configuration would take for "the default" (0) or
// silently as something else (a negative drain) are refused, each named;
// the defaults and the documented bounds pass.
func TestCheckRefusesMeaninglessFlagValues(t *testing.T) {
	ok := DefaultExecutor()
	require.NoError(t, ok.Check())
	ok.TaskPidsMax, ok.MaxConnsPerClient, ok.TaskLogMaxFiles = -1, -1, 1000
	require.NoError(t, ok.Check())
	ok.GCRetention, ok.FetchTimeout = 0, 0 // 0: the default, as the docs say
	require.NoError(t, ok.Check())
	for flag, set := range map[string]func(*Executor){
		"--drain-grace must not be negative":               func(o *Executor) { o.DrainGrace = -time.Second },
		"--slots must not be negative, got -1":             func(o *Executor) { o.Slots = -1 },
		"--task-log-max-files must be between 1 and 1000":  func(o *Executor) { o.TaskLogMaxFiles = 0 },
		"--task-log-max-files must be between 1 and 1000,": func(o *Executor) { o.TaskLogMaxFiles = 1001 },
		"--task-log-max-size must be positive":             func(o *Executor) { o.TaskLogMaxSize = 0 },
		"--task-pids-max must be positive, or -1":          func(o *Executor) { o.TaskPidsMax = 0 },
		"--http-max-conns-per-client must be positive":     func(o *Executor) { o.MaxConnsPerClient = -7 },
		"--gc-retention must not be negative, got -1s":     func(o *Executor) { o.GCRetention = -time.Second },
		"--gc-interval must not be negative":               func(o *Executor) { o.GCInterval = -time.Hour },
		"--lease must not be negative":                     func(o *Executor) { o.Lease = -time.Minute },
		"--cancel-grace must not be negative":              func(o *Executor) { o.CancelGrace = -1 },
		"--fetch-timeout must not be negative":             func(o *Executor) { o.FetchTimeout = -1 },
		"--cpu-millis must be between 0":                   func(o *Executor) { o.CPUMillis = -5 },
		"--memory-mb must be between 0":                    func(o *Executor) { o.MemoryMB = -5 },
		`--join "nonsense" is not host:port`:               func(o *Executor) { o.Join = []string{"127.0.0.1:7421", "nonsense"} },
	} {
		o := DefaultExecutor()
		set(&o)
		require.ErrorContains(t, o.Check(), flag)
	}
	s := DefaultServer()
	require.NoError(t, s.Check())
	s.MaxConnsPerClient = 0
	require.ErrorContains(t, s.Check(), "--http-max-conns-per-client must be positive, or -1 for no bound, got 0")
	s = DefaultServer()
	s.Join = []string{"10.0.0.1:7421", "[::1]:7421", "m1.example:7421", "10.0.0.2"}
	require.EqualError(t, s.Check(), `--join "10.0.0.2" is not host:port (the gossip address of a master, such as 10.0.0.1:7421)`)
	for _, bad := range []string{"host:gossip", "10.0.0.1:99999", "10.0.0.1:0", "10.0.0.1:07421", "::1"} {
		s.Join = []string{bad}
		require.ErrorContains(t, s.Check(), "is not host:port", bad)
	}
}
