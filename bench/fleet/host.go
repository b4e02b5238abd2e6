package fleet

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// HostArg is the first argument that makes the benchmark binary a fleet
// host (see RunHost).
const HostArg = "fleet-host"

// HostConfig describes a fleet run in child processes: N executors with
// Slots each, PerSecond of them started a second, spread over Procs
// processes (1 if zero).
type HostConfig struct {
	N, Slots  int
	Prefix    string
	Dir       string
	Join      []string
	PerSecond int
	Procs     int
}

// Process is a fleet running in child processes: processes holding every
// sim executor between them, as the in-process Fleet does, but whose CPU
// can be read apart from the load generator's and which are stopped at once
// with SIGKILL, however busy their gossip is.
type Process struct {
	hosts []*host
}

// host is one child process of a fleet.
type host struct {
	cmd     *exec.Cmd
	stdin   io.Closer
	exited  chan struct{}
	ready   chan error
	started atomic.Int64
}

// Spawn starts exe (this benchmark's binary) as c.Procs fleet hosts, each
// with its share of the executors (named as one fleet of c.N would name
// them) and of the start rate. WaitReady waits for the executors to start.
func Spawn(exe string, c HostConfig) (*Process, error) {
	procs := min(max(1, c.Procs), max(1, c.N))
	p := &Process{}
	first := 0
	for i := 0; i < procs; i++ {
		n := c.N / procs
		if i < c.N%procs {
			n++
		}
		rate := max(1, c.PerSecond/procs)
		h, err := spawnHost(exe, "-n", fmt.Sprint(n), "-first", fmt.Sprint(first), "-slots", fmt.Sprint(c.Slots), "-prefix", c.Prefix,
			"-dir", c.Dir, "-join", strings.Join(c.Join, ","), "-rate", fmt.Sprint(rate))
		if err != nil {
			p.Kill()
			return nil, err
		}
		p.hosts = append(p.hosts, h)
		first += n
	}
	return p, nil
}

// hostNice is the niceness of a fleet's processes. Its executors stand for
// a thousand machines of their own, and on these two cores their gossip
// and HTTP servers otherwise take the masters' share: the leader, starved,
// lost its quorum's heartbeats and stepped down about every second while
// the fleet ran (39 leaderships in one run of the 1,000-executor shapes).
// At nice 10 the fleet gets what the masters leave, as it would on
// machines of its own; the masters still share the cores with it.
const hostNice = "10"

func spawnHost(exe string, args ...string) (*host, error) {
	argv := append([]string{exe, HostArg}, args...)
	if nice, err := exec.LookPath("nice"); err == nil {
		argv = append([]string{nice, "-n", hostNice}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &host{cmd: cmd, stdin: stdin, exited: make(chan struct{}), ready: make(chan error, 2)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var n int64
			switch line := sc.Text(); {
			case line == "ready":
				h.ready <- nil
			case strings.HasPrefix(line, "started "):
				if _, err := fmt.Sscan(strings.TrimPrefix(line, "started "), &n); err == nil {
					h.started.Store(n)
				}
			}
		}
		h.ready <- errors.New("fleet host exited before its executors started")
	}()
	go func() {
		_ = cmd.Wait()
		close(h.exited)
	}()
	return h, nil
}

// WaitReady waits until every executor has started.
func (p *Process) WaitReady(ctx context.Context) error {
	for _, h := range p.hosts {
		select {
		case err := <-h.ready:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("%d executors started: %w", p.Started(), ctx.Err())
		}
	}
	return nil
}

// Started is how many executors have started so far.
func (p *Process) Started() int {
	n := 0
	for _, h := range p.hosts {
		n += int(h.started.Load())
	}
	return n
}

// Pids are the hosts' process ids.
func (p *Process) Pids() []int {
	out := make([]int, len(p.hosts))
	for i, h := range p.hosts {
		out[i] = h.cmd.Process.Pid
	}
	return out
}

// Kill stops the hosts and every executor in them at once.
func (p *Process) Kill() {
	for _, h := range p.hosts {
		_ = h.cmd.Process.Kill()
		_ = h.stdin.Close()
	}
	for _, h := range p.hosts {
		<-h.exited
	}
}

// RunHost is the fleet host's main: it starts the fleet, prints "ready",
// and holds it until its standard input closes (the parent is done or
// gone). It returns the exit code.
func RunHost(args []string) int {
	fs := flag.NewFlagSet(HostArg, flag.ContinueOnError)
	n := fs.Int("n", 100, "executors")
	first := fs.Int("first", 0, "executors before this host's (its first is named <prefix><first+1>)")
	slots := fs.Int("slots", 100, "slots per executor")
	prefix := fs.String("prefix", "sim", "executor id prefix")
	dir := fs.String("dir", "", "data directory")
	join := fs.String("join", "", "comma-separated master gossip addresses")
	rate := fs.Int("rate", 100, "executors started per second")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	profileLater()
	var count atomic.Int64
	go func() {
		for range time.Tick(time.Second) {
			fmt.Printf("started %d\n", count.Load())
		}
	}()
	_, err := start(context.Background(), *first, *n, *slots, *prefix, *dir, strings.Split(*join, ","), *rate, &count)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet host:", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	// The executors die with the process.
	return 0
}

// profileLater writes a CPU profile of this host when FLEET_CPUPROFILE
// names a file ("%p" replaced by the process id): of FLEET_CPUPROFILE_FOR
// (default 20s), starting FLEET_CPUPROFILE_AFTER (default 0) after the
// host started. It is how the fleet's own cost is profiled
// (docs/BENCHMARKS.md, "Profiling").
func profileLater() {
	file := os.Getenv("FLEET_CPUPROFILE")
	if file == "" {
		return
	}
	after, _ := time.ParseDuration(os.Getenv("FLEET_CPUPROFILE_AFTER"))
	d, err := time.ParseDuration(os.Getenv("FLEET_CPUPROFILE_FOR"))
	if err != nil {
		d = 20 * time.Second
	}
	time.AfterFunc(after, func() {
		f, err := os.Create(strings.ReplaceAll(file, "%p", fmt.Sprint(os.Getpid())))
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleet host: FLEET_CPUPROFILE:", err)
			return
		}
		time.AfterFunc(d, func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	})
}

// WaitHeard waits until every executor at addrs (HTTP addresses) has
// accepted a request from the leader with the given token. It asks 32
// executors at a time.
func WaitHeard(ctx context.Context, addrs []string, token uint64) error {
	pending := addrs
	for {
		ok := make([]bool, len(pending))
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for i, a := range pending {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ok[i] = heard(ctx, a, token)
			}()
		}
		wg.Wait()
		var still []string
		for i, a := range pending {
			if !ok[i] {
				still = append(still, a)
			}
		}
		if len(still) == 0 {
			return nil
		}
		pending = still
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d executors have not heard from the leader: %w", len(pending), len(addrs), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
