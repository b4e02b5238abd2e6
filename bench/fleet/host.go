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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// HostArg is the first argument that makes the benchmark binary a fleet
// host (see RunHost).
const HostArg = "fleet-host"

// HostConfig describes a fleet run in a child process.
type HostConfig struct {
	N, Slots  int
	Prefix    string
	Dir       string
	Join      []string
	PerSecond int
}

// Process is a fleet running in a child process: one process holding every
// sim executor, as the in-process Fleet does, but whose CPU can be read on
// its own and which is stopped at once with SIGKILL, however busy its
// gossip is.
type Process struct {
	cmd     *exec.Cmd
	stdin   io.Closer
	exited  chan struct{}
	ready   chan error
	started atomic.Int64
}

// Spawn starts exe (this benchmark's binary) as a fleet host. WaitReady
// waits for its executors to start.
func Spawn(exe string, c HostConfig) (*Process, error) {
	cmd := exec.Command(exe, HostArg, "-n", fmt.Sprint(c.N), "-slots", fmt.Sprint(c.Slots), "-prefix", c.Prefix,
		"-dir", c.Dir, "-join", strings.Join(c.Join, ","), "-rate", fmt.Sprint(c.PerSecond))
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
	p := &Process{cmd: cmd, stdin: stdin, exited: make(chan struct{}), ready: make(chan error, 2)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var n int64
			switch line := sc.Text(); {
			case line == "ready":
				p.ready <- nil
			case strings.HasPrefix(line, "started "):
				if _, err := fmt.Sscan(strings.TrimPrefix(line, "started "), &n); err == nil {
					p.started.Store(n)
				}
			}
		}
		p.ready <- errors.New("fleet host exited before its executors started")
	}()
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// WaitReady waits until every executor has started.
func (p *Process) WaitReady(ctx context.Context) error {
	select {
	case err := <-p.ready:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%d executors started: %w", p.started.Load(), ctx.Err())
	}
}

// Started is how many executors have started so far.
func (p *Process) Started() int { return int(p.started.Load()) }

// Pid is the host's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill stops the host and every executor in it at once.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	_ = p.stdin.Close()
	<-p.exited
}

// RunHost is the fleet host's main: it starts the fleet, prints "ready",
// and holds it until its standard input closes (the parent is done or
// gone). It returns the exit code.
func RunHost(args []string) int {
	fs := flag.NewFlagSet(HostArg, flag.ContinueOnError)
	n := fs.Int("n", 100, "executors")
	slots := fs.Int("slots", 100, "slots per executor")
	prefix := fs.String("prefix", "sim", "executor id prefix")
	dir := fs.String("dir", "", "data directory")
	join := fs.String("join", "", "comma-separated master gossip addresses")
	rate := fs.Int("rate", 100, "executors started per second")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var count atomic.Int64
	go func() {
		for range time.Tick(time.Second) {
			fmt.Printf("started %d\n", count.Load())
		}
	}()
	_, err := start(context.Background(), *n, *slots, *prefix, *dir, strings.Split(*join, ","), *rate, &count)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet host:", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	// The executors die with the process.
	return 0
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
