// Command jmprofile reproduces one macro benchmark's load with the three
// masters inside this process (package master, the same code the binary
// runs, with Raft's fsync on) and writes Go profiles of it: the masters'
// binary has no profiling endpoint, so this is how their hot paths are
// found. The load generator runs in the same process, so the profiles show
// it too (the client package and the sim executors are easy to tell apart).
//
//	go run ./bench/cmd/jmprofile -load submit -clients 64 -cpuprofile /tmp/submit.cpu
//	go run ./bench/cmd/jmprofile -load place -executors 100 -slots 100 -width 10000 -cpuprofile /tmp/place.cpu
//	go run ./bench/cmd/jmprofile -load cancel -executors 100 -slots 100 -width 10000 -cpuprofile /tmp/cancel.cpu
//	go run ./bench/cmd/jmprofile -load heartbeat -executors 300 -slots 10 -cpuprofile /tmp/hb.cpu
//
// Loads:
//   - submit: -clients goroutines PUT one-subtask jobs, spread over the
//     masters, for -duration.
//   - place: -executors sim executors (in process, joined through gossip),
//     then -jobs jobs of -width sim subtasks; the profiles cover -rounds
//     rounds, each from its first submission until every subtask is
//     RUNNING (-duration is ignored; the subtasks keep their slots, so
//     -executors x -slots must hold them all).
//   - heartbeat: -executors sim executors idle for -duration (the leader's
//     heartbeat and reconcile path).
//   - cancel: as place (outside the profiles), then cancels the jobs; the
//     profiles cover the cancellation until every job is CANCELED.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"jobmaster/bench/cluster"
	"jobmaster/bench/fleet"
	"jobmaster/client"
	"jobmaster/fsm"
	"jobmaster/master"
	"jobmaster/placement"
	"jobmaster/transport"
	"jobmaster/wire"
)

func main() {
	load := flag.String("load", "submit", "submit, place, cancel or heartbeat")
	clients := flag.Int("clients", 64, "submit, place, cancel: concurrent clients")
	executors := flag.Int("executors", 100, "place, cancel, heartbeat: sim executors")
	slots := flag.Int("slots", 100, "place, cancel, heartbeat: slots per executor")
	jobs := flag.Int("jobs", 1, "place, cancel: jobs per round")
	width := flag.Int("width", 10000, "place, cancel: subtasks per job")
	rounds := flag.Int("rounds", 1, "place: rounds of -jobs jobs, one after the other")
	duration := flag.Duration("duration", 10*time.Second, "how long to profile")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile here")
	blockProfile := flag.String("blockprofile", "", "write a blocking profile here")
	mutexProfile := flag.String("mutexprofile", "", "write a mutex contention profile here")
	memProfile := flag.String("memprofile", "", "write an allocation profile here")
	traceFile := flag.String("trace", "", "write an execution trace of the first 2 s of the load here")
	policy := flag.String("placement", "spread", "the masters' --placement: spread or pack")
	raftMetrics = flag.Bool("raftmetrics", false, "submit, place: print Raft's timings (medians, in ms) and counts after the load (pooled over the three masters where each records one)")
	flag.Parse()
	var err error
	if placementPolicy, err = placement.ParsePolicy(*policy); err != nil {
		fmt.Fprintln(os.Stderr, "jmprofile: -placement:", err)
		os.Exit(2)
	}

	if err := run(*load, *clients, *executors, *slots, *jobs, *width, *rounds, *duration, profiles{
		cpu: *cpuProfile, block: *blockProfile, mutex: *mutexProfile, mem: *memProfile, trace: *traceFile,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "jmprofile:", err)
		os.Exit(1)
	}
}

var raftMetrics *bool

// placementPolicy is the masters' --placement (-placement).
var placementPolicy placement.Policy

// printRaftMetrics prints the medians and counts of Raft's timings that
// leader serves on /v1/metrics (hashicorp/raft's own, through go-metrics):
// where a commit's time goes. go-metrics is process-wide, so with the three
// masters in this process a timing that every master records (the FSM's
// apply, say) is pooled over the three, its count three times one
// master's; those only a leader records (commitTime, dispatchLog,
// replication) or only followers (rpc.appendEntries) are theirs alone.
func printRaftMetrics(leader *master.Master) {
	resp, err := http.Get("http://" + leader.HTTPAddr() + "/v1/metrics")
	if err != nil {
		fmt.Fprintln(os.Stderr, "raft metrics:", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "jobmaster_raft_") && !strings.Contains(line, "peer_id") &&
			(strings.Contains(line, `quantile="0.5"`) || strings.Contains(line, "_count ")) {
			fmt.Fprintln(os.Stderr, line)
		}
	}
}

type profiles struct{ cpu, block, mutex, mem, trace string }

// startMasters starts three masters in this process and waits for an
// established leader. It returns them and their gossip addresses.
func startMasters(dir string) ([]*master.Master, []string, error) {
	type addrs struct{ http, raft, gossip string }
	as := make([]addrs, 3)
	var join []string
	for i := range as {
		for _, p := range []*string{&as[i].http, &as[i].raft, &as[i].gossip} {
			a, err := cluster.FreeAddr()
			if err != nil {
				return nil, nil, err
			}
			*p = a
		}
		join = append(join, as[i].gossip)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ms []*master.Master
	for i, a := range as {
		m, err := master.New(master.Config{
			NodeID: fmt.Sprintf("m%d", i+1), DataDir: filepath.Join(dir, fmt.Sprintf("m%d", i+1)),
			HTTPAddr: a.http, RaftAddr: a.raft, GossipAddr: a.gossip, Join: join, BootstrapExpect: 3,
			Logger: quiet, RaftLog: io.Discard, Placement: placementPolicy,
		})
		if err != nil {
			return ms, nil, err
		}
		ms = append(ms, m)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range ms {
			if m.IsLeader() {
				return ms, join, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ms, join, fmt.Errorf("no leader")
}

func run(load string, conc, executors, slots, jobs, width, rounds int, d time.Duration, p profiles) error {
	dir, err := os.MkdirTemp("", "jmprofile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ms, gossip, err := startMasters(dir)
	defer func() {
		for _, m := range ms {
			_ = m.Shutdown(context.Background())
		}
	}()
	if err != nil {
		return err
	}
	var addrs []string
	var leader *master.Master
	for _, m := range ms {
		addrs = append(addrs, m.HTTPAddr())
		if m.IsLeader() {
			leader = m
		}
	}
	// Pooled as the benchmarks' clients are: the client package's default
	// of two idle connections a master would dial for most requests here.
	hc := transport.NewClient(transport.ClientOptions{MaxIdleConnsPerHost: conc + 8, IdleConnTimeout: time.Minute})
	defer hc.CloseIdleConnections()
	cl, err := client.New(strings.Join(addrs, ","), client.WithHTTPClient(hc))
	if err != nil {
		return err
	}
	ctx := context.Background()

	var fl *fleet.Fleet
	if load != "place" {
		rounds = 1
	}
	if (load == "place" || load == "cancel") && rounds*jobs*width > executors*slots {
		return fmt.Errorf("-rounds %d x -jobs %d x -width %d subtasks need more than -executors %d x -slots %d slots: they would never all run", rounds, jobs, width, executors, slots)
	}
	if load == "place" || load == "heartbeat" || load == "cancel" {
		fl, err = fleet.Start(ctx, executors, slots, "sim", filepath.Join(dir, "fleet"), gossip, 100)
		if err != nil {
			return err
		}
		defer fl.Close()
		if err := fl.WaitToken(ctx, leader.Token()); err != nil {
			return err
		}
		time.Sleep(2 * time.Second)
		fmt.Fprintf(os.Stderr, "%d sim executors heartbeated\n", executors)
	}

	var done atomic.Int64
	if load == "cancel" {
		// The jobs run first, outside the profiles.
		if err := placeLoad(ctx, cl, leader, "pl-", conc, jobs, width, &done); err != nil {
			return err
		}
		done.Store(0)
	}
	stop, err := startProfiles(p)
	if err != nil {
		return err
	}
	switch load {
	case "submit":
		cpu0 := processCPU()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		err = submitLoad(ctx, hc, addrs, conc, d, &done)
		runtime.ReadMemStats(&ms1)
		defer fmt.Fprintf(os.Stderr, "submit: %.1f KB and %.0f allocations per operation (this process)\n",
			float64(ms1.TotalAlloc-ms0.TotalAlloc)/1024/float64(max(done.Load(), 1)), float64(ms1.Mallocs-ms0.Mallocs)/float64(max(done.Load(), 1)))
		if *raftMetrics {
			printRaftMetrics(leader)
		}
		defer func(cpu time.Duration) {
			fmt.Fprintf(os.Stderr, "submit: %.0f µs of CPU per operation (this process: masters and load)\n",
				float64(cpu.Microseconds())/float64(max(done.Load(), 1)))
		}(processCPU() - cpu0)
	case "place":
		t0 := time.Now()
		for r := 0; r < rounds && err == nil; r++ {
			err = placeLoad(ctx, cl, leader, fmt.Sprintf("pl%d-", r), conc, jobs, width, &done)
		}
		d = time.Since(t0)
		if err == nil {
			printDeploys(ms)
			if *raftMetrics {
				printRaftMetrics(leader)
			}
		}
	case "heartbeat":
		time.Sleep(d)
	case "cancel":
		t0 := time.Now()
		err = cancelLoad(ctx, cl, leader, jobs, width, &done)
		d = time.Since(t0)
	default:
		err = fmt.Errorf("unknown load %q", load)
	}
	if serr := stop(); err == nil {
		err = serr
	}
	fmt.Fprintf(os.Stderr, "%s: %d operations in %s (%.0f/s)\n", load, done.Load(), d, float64(done.Load())/d.Seconds())
	return err
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func submitLoad(ctx context.Context, hc *http.Client, addrs []string, conc int, d time.Duration, done *atomic.Int64) error {
	var cls []*client.Client
	for _, a := range addrs {
		c, err := client.New(a, client.WithHTTPClient(hc))
		if err != nil {
			return err
		}
		cls = append(cls, c)
	}
	end := time.Now().Add(d)
	spec := []byte(`{"name":"bench","vertices":[{"id":"v","parallelism":1,"command":["/bin/true"]}]}`)
	var wg sync.WaitGroup
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; time.Now().Before(end); seq++ {
				if _, err := cls[i%len(cls)].SubmitJob(ctx, fmt.Sprintf("p-%d-%d", i, seq), spec); err == nil {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

func placeLoad(ctx context.Context, cl *client.Client, leader *master.Master, prefix string, conc, jobs, width int, done *atomic.Int64) error {
	spec := []byte(fmt.Sprintf(`{"name":"place","vertices":[{"id":"v","parallelism":%d,"command":["sim"],"env":{"SIM_DURATION":"1h"}}]}`, width))
	ids := make([]string, jobs)
	for j := range ids {
		ids[j] = fmt.Sprintf("%s%d", prefix, j)
	}
	// Submitted conc at a time, as the placement benchmark does.
	next := make(chan string)
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				if _, err := cl.SubmitJob(ctx, id, spec); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	for {
		running := 0
		leader.FSM().Read(func(st *fsm.State) {
			for _, id := range ids {
				v, ok := st.Job(id)
				if !ok {
					continue
				}
				for _, vx := range v.Vertices {
					for _, e := range vx.Subtasks {
						if e.State == wire.StateRunning {
							running++
						}
					}
				}
			}
		})
		if running == jobs*width {
			done.Add(int64(jobs * width))
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cancelLoad cancels the jobs placeLoad started and waits until every one
// is CANCELED.
func cancelLoad(ctx context.Context, cl *client.Client, leader *master.Master, jobs, width int, done *atomic.Int64) error {
	for j := 0; j < jobs; j++ {
		if err := cl.CancelJob(ctx, fmt.Sprintf("pl-%d", j)); err != nil {
			return err
		}
	}
	for {
		ended := 0
		leader.FSM().Read(func(st *fsm.State) {
			for j := 0; j < jobs; j++ {
				if v, ok := st.Job(fmt.Sprintf("pl-%d", j)); ok && v.Status == fsm.JobCanceled {
					ended++
				}
			}
		})
		if ended == jobs {
			done.Add(int64(jobs * width))
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startProfiles starts the requested profiles and returns the function
// that writes them.
func startProfiles(p profiles) (func() error, error) {
	if p.block != "" {
		runtime.SetBlockProfileRate(int(time.Microsecond))
	}
	if p.mutex != "" {
		runtime.SetMutexProfileFraction(5)
	}
	var cpuf *os.File
	if p.cpu != "" {
		f, err := os.Create(p.cpu)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		cpuf = f
	}
	if p.trace != "" {
		f, err := os.Create(p.trace)
		if err != nil {
			return nil, err
		}
		if err := trace.Start(f); err != nil {
			return nil, err
		}
		time.AfterFunc(2*time.Second, func() { trace.Stop(); f.Close() })
	}
	return func() error {
		if cpuf != nil {
			pprof.StopCPUProfile()
			cpuf.Close()
		}
		for _, w := range []struct{ name, path string }{{"block", p.block}, {"mutex", p.mutex}, {"allocs", p.mem}} {
			if w.path == "" {
				continue
			}
			f, err := os.Create(w.path)
			if err != nil {
				return err
			}
			if err := pprof.Lookup(w.name).WriteTo(f, 0); err != nil {
				return err
			}
			f.Close()
		}
		return nil
	}, nil
}

// printDeploys prints the masters' counts of deploy requests and of the
// tasks they carried, added up (from their /v1/metrics: a leader change
// during the load moves the deploys to another master).
func printDeploys(ms []*master.Master) {
	sums := make(map[string]float64)
	for _, m := range ms {
		resp, err := http.Get("http://" + m.HTTPAddr() + "/v1/metrics")
		if err != nil {
			fmt.Fprintln(os.Stderr, "metrics:", err)
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 || !(strings.HasSuffix(f[0], "deploy_requests_total") || strings.HasSuffix(f[0], "deployed_tasks_total")) {
				continue
			}
			var v float64
			if _, err := fmt.Sscan(f[1], &v); err == nil {
				sums[f[0]] += v
			}
		}
		resp.Body.Close()
	}
	for _, k := range []string{"jobmaster_deploy_requests_total", "jobmaster_deployed_tasks_total"} {
		fmt.Fprintf(os.Stderr, "%s %.0f\n", k, sums[k])
	}
}
