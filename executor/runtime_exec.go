package executor

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"jobmaster/wire"
)

// killAfterGrace is how much longer than the shim's grace the executor waits
// before it SIGKILLs a cancelled task's process group itself.
const killAfterGrace = 2 * time.Second

// execRuntime runs every task as a process: the shim, leader of a new
// process group, which runs the task's command in that group. One waiter
// goroutine per task reports its end.
type execRuntime struct {
	dataDir string
	nodeID  string
	shim    []string
	grace   time.Duration
	logs    logLimits
	log     *slog.Logger
	onExit  func(id string, res exitResult)
	// dirMu is held while a working directory is created (gcloop.go).
	dirMu *sync.Mutex
	// cg puts every task in cgroups capped at its resources (cgroup.go).
	cg *cgroups

	// cgLive names the executions whose cgroups are being made or in use
	// (guarded by mu): sweepCgroups leaves them alone.
	cgLive map[string]bool

	mu     sync.Mutex
	procs  map[string]*proc
	closed bool
	wg     sync.WaitGroup
}

// proc is a running task: its shim's pid is also its process group id.
type proc struct {
	id  string
	cmd *exec.Cmd
	pid int
	// memoryMB is the task's declared memory; cgroup: it runs in cgroups.
	memoryMB int64
	cgroup   bool

	mu       sync.Mutex
	exited   bool // the shim has exited (it may not be reaped yet)
	stopping bool
	escalate *time.Timer
}

func newExecRuntime(cfg Config, onExit func(string, exitResult), dirMu *sync.Mutex) *execRuntime {
	return &execRuntime{
		dataDir: cfg.DataDir,
		nodeID:  cfg.NodeID,
		shim:    cfg.ShimCommand,
		grace:   cfg.CancelGrace,
		logs:    logLimits{maxSize: cfg.TaskLogMaxSize, maxFiles: cfg.TaskLogMaxFiles},
		log:     cfg.Logger,
		onExit:  onExit,
		dirMu:   dirMu,
		cg:      setupCgroups(cfg),
		cgLive:  make(map[string]bool),
		procs:   make(map[string]*proc),
	}
}

// logLimits are the rotation limits of task logs.
type logLimits struct {
	maxSize  int64
	maxFiles int
}

// shimArgs is the shim's command line after ShimCommand. With a working
// directory dir, the shim writes the task's logs there, rotating them at
// the limits; cgroups are the task's, which the shim removes if its
// executor died. executorPID is the executor's pid: a shim whose parent it
// no longer is when it starts runs nothing.
func shimArgs(grace time.Duration, executorPID int, leaseFile, dir string, logs logLimits, cgroups, command []string) []string {
	args := []string{"--grace", grace.String(), "--executor-pid", strconv.Itoa(executorPID), "--lease-file", leaseFile}
	for _, d := range cgroups {
		args = append(args, "--cgroup", d)
	}
	if dir != "" {
		args = append(args, "--stdout", filepath.Join(dir, "stdout.log"), "--stderr", filepath.Join(dir, "stderr.log"),
			"--log-max-size", strconv.FormatInt(logs.maxSize, 10), "--log-max-files", strconv.Itoa(logs.maxFiles))
	}
	return append(append(args, "--"), command...)
}

// execInCommand is the command the shim runs for a task in cgroups: the
// shim again, which joins the cgroups dirs and then executes the task's
// command in its own place (RunShim's --exec-in), so the task runs
// nothing of its own outside them.
func execInCommand(shim, dirs, command []string) []string {
	out := append([]string(nil), shim...)
	for _, d := range dirs {
		out = append(out, "--exec-in", d)
	}
	return append(append(out, "--"), command...)
}

// taskEnv is a task's environment: the executor's own, the task's Env, then
// the JOBMASTER_ variables (which the task's Env cannot override). A task
// with outputs sees JOBMASTER_OUTPUT_DIR, one with inputs
// JOBMASTER_INPUT_DIR: directories in its execution directory under
// dataDir (dataplane.go).
func taskEnv(base []string, t wire.Task, nodeID, dataDir string) ([]string, error) {
	env := append([]string(nil), base...)
	keys := make([]string, 0, len(t.Env))
	for k := range t.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(t.Env[k], 0) {
			return nil, fmt.Errorf("invalid environment variable %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+t.Env[k])
	}
	env = append(env,
		"JOBMASTER_JOB_ID="+t.JobID,
		"JOBMASTER_VERTEX="+t.Vertex,
		"JOBMASTER_SUBTASK="+strconv.Itoa(t.Subtask),
		"JOBMASTER_PARALLELISM="+strconv.Itoa(t.Parallelism),
		"JOBMASTER_ATTEMPT="+strconv.Itoa(t.Attempt),
		"JOBMASTER_EXECUTION_ID="+t.ExecutionID,
		"JOBMASTER_EXECUTOR_ID="+nodeID,
	)
	out, in, _ := taskDirs(dataDir, t.ExecutionID)
	if len(t.Outputs) > 0 {
		env = append(env, "JOBMASTER_OUTPUT_DIR="+out)
	}
	if len(t.Inputs) > 0 {
		env = append(env, "JOBMASTER_INPUT_DIR="+in)
	}
	return env, nil
}

// lookCommand checks that name can be executed from dir with env's PATH,
// so that "command not found" fails the deployment instead of the task.
func lookCommand(name, dir string, env []string) error {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) && !filepath.IsAbs(name) {
			return fmt.Errorf("command not found: %s (a path relative to the task's working directory)", name)
		}
		return executable(p)
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if filepath.IsAbs(d) && executable(filepath.Join(d, name)) == nil {
			return nil
		}
	}
	return fmt.Errorf("command not found: %s", name)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("command not found: %s", p)
	case err != nil:
		return err
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return fmt.Errorf("command %s is not executable", p)
	}
	return nil
}

func (r *execRuntime) start(t wire.Task) error {
	if len(t.Command) == 0 || t.Command[0] == "" {
		return errors.New("empty command")
	}
	dir := executionDir(r.dataDir, t.ExecutionID)
	r.dirMu.Lock()
	err := os.MkdirAll(dir, 0o700)
	r.dirMu.Unlock()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	env, err := taskEnv(os.Environ(), t, r.nodeID, r.dataDir)
	if err != nil {
		return err
	}
	if err := lookCommand(t.Command[0], dir, env); err != nil {
		return err
	}
	stdout, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("stdout log: %w", err)
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(filepath.Join(dir, "stderr.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("stderr log: %w", err)
	}
	defer stderr.Close()

	command := t.Command
	cgroupDirs, err := r.makeCgroups(t)
	if err != nil {
		return err
	}
	if len(cgroupDirs) > 0 {
		command = execInCommand(r.shim, cgroupDirs, t.Command)
	}
	args := append(append([]string(nil), r.shim[1:]...), shimArgs(r.grace, os.Getpid(), filepath.Join(r.dataDir, leaseFileName), dir, r.logs, cgroupDirs, command)...)
	cmd := exec.Command(r.shim[0], args...)
	cmd.Dir = dir
	cmd.Env = env
	// The shim writes the logs (rotating them); what it says before it
	// has opened them lands in them too.
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: executorDeathSignal}

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		if len(cgroupDirs) > 0 {
			r.removeCgroups(t.ExecutionID)
		}
		return errRuntimeClosed
	}
	r.wg.Add(1)
	r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		r.wg.Done()
		if len(cgroupDirs) > 0 {
			r.removeCgroups(t.ExecutionID)
		}
		return fmt.Errorf("start shim: %w", err)
	}
	p := &proc{id: t.ExecutionID, cmd: cmd, pid: cmd.Process.Pid, memoryMB: t.Resources.MemoryMB, cgroup: len(cgroupDirs) > 0}
	r.mu.Lock()
	r.procs[p.id] = p
	closed := r.closed
	r.mu.Unlock()
	if closed {
		p.killGroup()
	}
	go r.wait(p)
	return nil
}

// wait waits for p's shim to exit, kills what is left of its process group
// while the unreaped shim still holds the group id (so it cannot name some
// other group), then reaps it and reports the result.
func (r *execRuntime) wait(p *proc) {
	defer r.wg.Done()
	if err := waitExited(p.pid); err != nil {
		r.log.Warn("waiting for task shim", "execution", p.id, "pid", p.pid, "err", err)
	}
	p.mu.Lock()
	p.exited = true
	if p.escalate != nil {
		p.escalate.Stop()
	}
	p.mu.Unlock()
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = p.cmd.Wait()
	// The directory's time is the task's end: its retention counts from
	// there (gc.go).
	now := time.Now()
	_ = os.Chtimes(p.cmd.Dir, now, now)
	res := exitResultOf(p.cmd.ProcessState)
	if p.cgroup {
		if msg := oomVerdict(res.Code, r.cg.oomKills(p.id), p.memoryMB); msg != "" {
			res.Message = msg
		}
		r.removeCgroups(p.id)
	}
	r.mu.Lock()
	delete(r.procs, p.id)
	r.mu.Unlock()
	r.onExit(p.id, res)
}

// makeCgroups makes t's cgroups (none where tasks run without them).
func (r *execRuntime) makeCgroups(t wire.Task) ([]string, error) {
	if !r.cg.enforced() {
		return nil, nil
	}
	r.mu.Lock()
	r.cgLive[cgroupChild(t.ExecutionID)] = true
	r.mu.Unlock()
	dirs, err := r.cg.create(t.ExecutionID, t.Resources)
	if err != nil {
		r.mu.Lock()
		delete(r.cgLive, cgroupChild(t.ExecutionID))
		r.mu.Unlock()
	}
	return dirs, err
}

// removeCgroups removes execution id's cgroups.
func (r *execRuntime) removeCgroups(id string) {
	r.cg.remove(id)
	r.mu.Lock()
	delete(r.cgLive, cgroupChild(id))
	r.mu.Unlock()
}

// sweepCgroups removes the cgroups of ended tasks that could not be
// removed when they ended (gcloop.go).
func (r *execRuntime) sweepCgroups() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cg.sweep(func(name string) bool { return r.cgLive[name] })
}

// exitResultOf turns the shim's exit into a task result.
func exitResultOf(ps *os.ProcessState) exitResult {
	if ps == nil {
		return exitResult{Code: -1, Message: "task shim vanished"}
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return exitResult{Code: 128 + int(ws.Signal()), Message: "task shim killed by signal: " + ws.Signal().String()}
	}
	return exitResult{Code: ps.ExitCode()}
}

func (r *execRuntime) lookup(id string) *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[id]
}

// stop sends SIGTERM to the shim (which forwards it to the group and
// SIGKILLs the group after the grace period) and SIGKILLs the group itself
// if the shim is still alive killAfterGrace later.
func (r *execRuntime) stop(id string) {
	p := r.lookup(id)
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited || p.stopping {
		return
	}
	p.stopping = true
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	p.escalate = time.AfterFunc(r.grace+killAfterGrace, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.exited {
			r.log.Warn("task did not stop after SIGTERM: killing its process group", "execution", p.id, "pgid", p.pid)
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		}
	})
}

func (r *execRuntime) kill(id string) {
	if p := r.lookup(id); p != nil {
		p.killGroup()
	}
}

// killGroup SIGKILLs p's process group unless the shim has exited (then
// wait has done it already).
func (p *proc) killGroup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
}

func (r *execRuntime) close() {
	r.mu.Lock()
	r.closed = true
	procs := make([]*proc, 0, len(r.procs))
	for _, p := range r.procs {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	for _, p := range procs {
		p.killGroup()
	}
	r.wg.Wait()
	r.cg.close()
}

// waitExited blocks until process pid has exited, without reaping it
// (waitid with WNOWAIT).
func waitExited(pid int) error {
	const (
		pPID    = 1         // P_PID
		wExited = 0x4       // WEXITED
		wNoWait = 0x1000000 // WNOWAIT
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}
