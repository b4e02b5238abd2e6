package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Node is one jobmaster process.
type Node struct {
	c          *Cluster
	ID         string
	Role       string
	DataDir    string
	HTTPAddr   string
	RaftAddr   string
	GossipAddr string
	LogPath    string
	// IP is the node's address: its namespace's, or 127.0.0.1.
	IP   string
	args func() []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	frozen []int // processes Freeze stopped, the node's own first
}

var (
	buildOnce sync.Once
	binPath   string
	buildDir  string // the temporary directory binPath was built into, if any
	buildErr  error
)

// removeBinary removes the binary binary built, if it built one.
func removeBinary() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// binary builds cmd/jobmaster once (or uses JOBMASTER_BIN).
func binary(t testing.TB) string {
	buildOnce.Do(func() {
		if p := os.Getenv("JOBMASTER_BIN"); p != "" {
			binPath = p
			return
		}
		dir, err := os.MkdirTemp("", "jobmaster-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir, binPath = dir, filepath.Join(dir, "jobmaster")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, "../cmd/jobmaster").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Start starts the node's process.
func (n *Node) Start() {
	n.c.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		n.c.t.Fatalf("%s already running", n.ID)
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.c.t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== start %s %s\n", n.ID, time.Now().Format(time.RFC3339Nano))
	bin := binary(n.c.t)
	argv := append([]string{bin}, n.args()...)
	if n.c.Net != nil {
		argv = append(n.c.Net.Wrap(n.ID), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), n.c.opts.Env...)
	// The node dies with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		n.c.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.cmd, n.exited, n.paused, n.frozen = cmd, exited, false, nil
	if n.c.Net != nil {
		// Signals must reach jobmaster, not the ip wrapper: wait until the
		// wrapper has exec'ed it in place (same pid).
		awaitExec(n.c.t, cmd.Process.Pid, bin, exited)
	}
}

// awaitExec waits until process pid runs the program at path.
func awaitExec(t testing.TB, pid int, path string, exited <-chan struct{}) {
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		want = path
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == want {
			return
		}
		select {
		case <-exited:
			return // it failed to start; its log says why
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not exec %s", pid, path)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Pid is the node's process id (0 when stopped).
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the process runs (possibly paused).
func (n *Node) Running() bool { return n.Pid() != 0 }

// Kill sends SIGKILL and waits for the process to exit.
func (n *Node) Kill() { n.signalAndWait(syscall.SIGKILL) }

// Stop sends SIGTERM and waits for a graceful exit.
func (n *Node) Stop() { n.signalAndWait(syscall.SIGTERM) }

func (n *Node) signalAndWait(sig syscall.Signal) {
	n.mu.Lock()
	cmd, exited, paused, frozen := n.cmd, n.exited, n.paused, n.frozen
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	// Tasks frozen with their executor must run again to notice its death.
	signalAll(frozen, syscall.SIGCONT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	n.mu.Lock()
	n.cmd = nil
	n.paused = false
	n.frozen = nil
	n.mu.Unlock()
}

// Pause stops the process with SIGSTOP (its tasks keep running).
func (n *Node) Pause() {
	if p := n.Pid(); p != 0 {
		_ = syscall.Kill(p, syscall.SIGSTOP)
		n.mu.Lock()
		n.paused = true
		n.mu.Unlock()
	}
}

// Resume continues a paused process.
func (n *Node) Resume() {
	if p := n.Pid(); p != 0 {
		_ = syscall.Kill(p, syscall.SIGCONT)
		n.mu.Lock()
		n.paused = false
		n.mu.Unlock()
	}
}

// Freeze stops the process and every process below it (an executor with
// its tasks), as a hung machine would. The node is stopped first, so it
// starts nothing new; descendants are stopped until a scan finds none
// running (a child forked during the first scan is caught by the next).
func (n *Node) Freeze() []int {
	p := n.Pid()
	if p == 0 {
		return nil
	}
	_ = syscall.Kill(p, syscall.SIGSTOP)
	all := []int{p}
	seen := map[int]bool{p: true}
	for round := 0; round < 20; round++ {
		fresh := 0
		for _, d := range descendants(p) {
			if !seen[d] {
				seen[d] = true
				all = append(all, d)
				_ = syscall.Kill(d, syscall.SIGSTOP)
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
	}
	n.mu.Lock()
	n.paused = true
	n.frozen = all
	n.mu.Unlock()
	return all
}

// Thaw continues processes Freeze stopped.
func (n *Node) Thaw(pids []int) {
	signalAll(pids, syscall.SIGCONT)
	n.mu.Lock()
	n.paused = false
	n.frozen = nil
	n.mu.Unlock()
}

// FrozenPids is what Freeze stopped, until Thaw (nil if not frozen).
func (n *Node) FrozenPids() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.frozen
}

// Paused reports whether the process is stopped (by Pause or Freeze).
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// Restart kills the node and starts it again, on an empty data dir if wipe.
func (n *Node) Restart(wipe bool) {
	n.Kill()
	if wipe {
		_ = os.RemoveAll(n.DataDir)
	}
	n.Start()
}
