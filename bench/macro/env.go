// Package macro holds the macro benchmarks: each starts a real cluster of
// three masters (processes of bin/jobmaster on loopback, Raft fsync on,
// default timings unless a benchmark says otherwise), drives it from this
// process, and adds its figures to a results.Run.
//
// The load generator (this process, and for the sim benchmarks the sim
// executors it hosts) shares the machine's cores with the masters; every
// benchmark that can reports the CPU each side used.
package macro

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"jobmaster/bench/cluster"
	"jobmaster/bench/procstat"
	"jobmaster/bench/results"
	"jobmaster/client"
	"jobmaster/placement"
	"jobmaster/transport"
)

// Env is what every benchmark needs.
type Env struct {
	// Bin is bin/jobmaster.
	Bin string
	// Exe is the benchmark's own binary, which hosts sim fleets when run
	// as fleet.HostArg.
	Exe string
	// Dir receives every cluster's data and logs, one subdirectory each.
	Dir string
	Run *results.Run
	// Quick shrinks trial counts and durations (for development; the
	// figures of a quick run are not the documented ones).
	Quick bool
	// Fleets are the sizes of the sim fleets the placement benchmark runs
	// (default 100 and 1000).
	Fleets []int
	// Clients are the concurrency levels of the submission benchmark
	// (default SubmissionLevels).
	Clients []int
	// Log receives progress lines.
	Log func(format string, args ...any)
	// TLS runs the clusters of the benchmarks that take it (failover,
	// submission) secure, as `jobmaster dev` runs: TLS everywhere, gossip
	// encryption, ACLs on with a token on every request. Their figures go
	// in groups named "<group> tls+acl".
	TLS bool
	// Placement is the masters' --placement.
	Placement placement.Policy

	mu       sync.Mutex
	clusters int
}

// Command is the command that reproduces the figures of benchmark name.
func Command(name string) string {
	return "go run ./bench/cmd/jmbench -only " + name
}

// command is Command for a benchmark that runs with TLS when e.TLS.
func (e *Env) command(name string) string {
	if e.TLS {
		return Command(name) + " -tls on"
	}
	return Command(name)
}

// group is the group of a benchmark's figures that runs secure when
// e.TLS: "submission", or "submission tls+acl".
func (e *Env) group(g string) string {
	if e.TLS {
		return g + " tls+acl"
	}
	return g
}

// StartCluster starts three masters in a fresh directory named after the
// benchmark; the cluster runs plain, whatever e.TLS (see StartSecurable).
func (e *Env) StartCluster(ctx context.Context, name string) (*cluster.Cluster, error) {
	return e.startCluster(ctx, name, false)
}

// StartSecurable is StartCluster for the benchmarks that run with TLS when
// e.TLS.
func (e *Env) StartSecurable(ctx context.Context, name string) (*cluster.Cluster, error) {
	return e.startCluster(ctx, name, e.TLS)
}

func (e *Env) startCluster(ctx context.Context, name string, secure bool) (*cluster.Cluster, error) {
	if secure {
		name += "-tls"
	}
	e.mu.Lock()
	e.clusters++
	dir := filepath.Join(e.Dir, fmt.Sprintf("%02d-%s", e.clusters, name))
	e.mu.Unlock()
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{Bin: e.Bin, Dir: dir, TLS: secure, Placement: e.Placement})
	if err != nil {
		return nil, fmt.Errorf("%s: start cluster: %w", name, err)
	}
	e.Log("%s: 3 masters up in %s (data and logs in %s)", name, time.Since(start).Round(time.Millisecond), dir)
	return c, nil
}

// Clients returns one API client per master, sharing an HTTP client sized
// for conc concurrent requests (CloseIdleConnections on it releases them).
func Clients(c *cluster.Cluster, conc int) ([]*client.Client, *http.Client, error) {
	hc := c.NewHTTPClient(transport.ClientOptions{MaxIdleConnsPerHost: conc + 8, IdleConnTimeout: time.Minute})
	var out []*client.Client
	for _, a := range c.HTTPAddrs() {
		cl, err := client.New(a, client.WithHTTPClient(hc), client.WithTimeout(30*time.Second))
		if err != nil {
			return nil, nil, err
		}
		out = append(out, cl)
	}
	return out, hc, nil
}

// FollowingClients returns one client of all the masters per master, each
// listing the masters from a different one first: a client starts at the
// first, and follows the leader its answers name.
func FollowingClients(c *cluster.Cluster, conc int) ([]*client.Client, *http.Client, error) {
	hc := c.NewHTTPClient(transport.ClientOptions{MaxIdleConnsPerHost: conc + 8, IdleConnTimeout: time.Minute})
	addrs := c.HTTPAddrs()
	var out []*client.Client
	for i := range addrs {
		rotated := append(slices.Clone(addrs[i:]), addrs[:i]...)
		cl, err := client.New(strings.Join(rotated, ","), client.WithHTTPClient(hc), client.WithTimeout(30*time.Second))
		if err != nil {
			return nil, nil, err
		}
		out = append(out, cl)
	}
	return out, hc, nil
}

// cpuWatch measures the CPU used by processes over a window.
type cpuWatch struct {
	names []string
	pids  []int
	from  []procstat.Sample
}

// watchCPU starts measuring the CPU of the named processes.
func watchCPU(names []string, pids []int) *cpuWatch {
	w := &cpuWatch{names: names, pids: pids, from: make([]procstat.Sample, len(pids))}
	for i, p := range pids {
		w.from[i], _ = procstat.Read(p)
	}
	return w
}

// stop returns each process's CPU in cores over the window and its RSS in
// MiB at the end, keyed "<name>_cpu_cores" and "<name>_rss_mib"; processes
// watched under one name (a fleet's hosts) are added up.
func (w *cpuWatch) stop() map[string]float64 {
	out := make(map[string]float64)
	for i, p := range w.pids {
		to, err := procstat.Read(p)
		if err != nil || w.from[i].At.IsZero() {
			continue
		}
		out[w.names[i]+"_cpu_cores"] += procstat.Cores(w.from[i], to)
		if c := procstat.ChildCores(w.from[i], to); c > 0 {
			out[w.names[i]+"_children_cpu_cores"] += c
		}
		out[w.names[i]+"_rss_mib"] += float64(to.RSS) / (1 << 20)
	}
	return out
}

// namesOf is name n times: n processes watched as one.
func namesOf(name string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = name
	}
	return out
}

// fleetNames names a fleet's host processes for a watch: "fleet", added up.
func fleetNames(pids []int) []string { return namesOf("fleet", len(pids)) }

// masterWatch watches the leader, each follower, this process and the sim
// fleet's processes (none, if fleetPids is empty).
func masterWatch(c *cluster.Cluster, l cluster.Leader, fleetPids []int) *cpuWatch {
	names := []string{"leader", "bench"}
	pids := []int{l.Node.Pid(), os.Getpid()}
	for i, f := range c.Followers(l) {
		names = append(names, fmt.Sprintf("follower%d", i+1))
		pids = append(pids, f.Pid())
	}
	names = append(names, fleetNames(fleetPids)...)
	pids = append(pids, fleetPids...)
	return watchCPU(names, pids)
}

// keep drops from m the entries whose key has none of the prefixes.
func keep(m map[string]float64, prefixes ...string) map[string]float64 {
	out := make(map[string]float64)
	for k, v := range m {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				out[k] = v
				break
			}
		}
	}
	return out
}

// waitUntil polls cond every interval until it holds or ctx ends.
func waitUntil(ctx context.Context, what string, interval time.Duration, cond func() (bool, error)) error {
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// ms converts a duration to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
