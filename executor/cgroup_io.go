package executor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"jobmaster/wire"
)

// cgroups carries out the decisions of cgroup.go for an exec runtime: it
// sets up the executor's parent cgroups at start, makes a child per
// execution before its task starts (the task joins it before it runs its
// command: RunShim's --exec-in), reads the child's OOM count when the task
// has ended, and removes it. A layout of version none does nothing.
//
// The parent cgroups exist while the executor has tasks: made with the
// first child, removed with the last, so that an executor killed while it
// runs none leaves nothing behind (the shims of one killed while it runs
// some remove theirs, and the parent: removeOrphanCgroups). Safe for
// concurrent use.
type cgroups struct {
	layout  cgroupLayout
	caps    cgroupCaps
	pidsMax int64
	// why says why a better layout (or any) is not used.
	why string
	log *slog.Logger
	// mu orders the making and removing of the parents.
	mu sync.Mutex
}

// Bounds on what is read from the kernel's files.
const (
	maxMountinfo  = 1 << 20
	maxCgroupFile = 1 << 16
)

// cgroupRemoveWait bounds how long removing a child waits for the
// processes killed in it to leave.
const cgroupRemoveWait = 2 * time.Second

// setupCgroups chooses and prepares the executor's layout; what it could
// not use is in why.
func setupCgroups(cfg Config) *cgroups {
	cg := &cgroups{pidsMax: cfg.TaskPidsMax, log: cfg.Logger.With("node", cfg.NodeID)}
	if cfg.DisableCgroups {
		cg.why = "turned off (--disable-cgroups)"
		return cg
	}
	mountinfo, err := readBounded("/proc/self/mountinfo", maxMountinfo)
	if err != nil {
		cg.why = "reading /proc/self/mountinfo: " + err.Error()
		return cg
	}
	own, err := readBounded("/proc/self/cgroup", maxCgroupFile)
	if err != nil {
		cg.why = "reading /proc/self/cgroup: " + err.Error()
		return cg
	}
	m := parseCgroupMounts(mountinfo)
	var v2c string
	if m.V2 != nil {
		v2c, _ = readBounded(filepath.Join(m.V2.Point, "cgroup.controllers"), maxCgroupFile)
	}
	cands, why := cgroupCandidates(m, parseProcCgroup(own), v2c, cgroupName(cfg.NodeID, cfg.DataDir))
	for _, l := range cands {
		caps, l, err := prepareLayout(l, m, cfg.Logger)
		if err != nil {
			why = append(why, l.Version.String()+": "+err.Error())
			continue
		}
		cg.layout, cg.caps = l, caps
		for _, p := range l.Parents { // made again with the first task
			_ = os.Remove(p.Dir)
		}
		break
	}
	cg.why = strings.Join(why, "; ")
	return cg
}

// prepareLayout makes l's parent cgroups, removes what a previous run of
// this executor left in them, and finds their optional files. On v1 a
// parent other than memory's that cannot be made is dropped (its limit is
// then unenforced).
func prepareLayout(l cgroupLayout, m cgroupMounts, log *slog.Logger) (cgroupCaps, cgroupLayout, error) {
	var caps cgroupCaps
	if l.Version == cgroupV2 {
		dir := l.Parents[0].Dir
		// The parent needs the controllers from the top of the hierarchy.
		if err := writeCgroupFile(filepath.Join(m.V2.Point, "cgroup.subtree_control"), v2SubtreeControl); err != nil {
			return caps, l, err
		}
		if err := makeParent(dir, log); err != nil {
			return caps, l, err
		}
		if err := writeCgroupFile(filepath.Join(dir, "cgroup.subtree_control"), v2SubtreeControl); err != nil {
			_ = os.Remove(dir)
			return caps, l, err
		}
		caps.Swap = fileExists(filepath.Join(dir, "memory.swap.max"))
		return caps, l, nil
	}
	var kept []cgroupParent
	for _, p := range l.Parents {
		if err := makeParent(p.Dir, log); err != nil {
			if p.Controller == "memory" {
				return caps, l, err
			}
			log.Warn("cgroup v1 controller unusable: its limit is not enforced", "controller", p.Controller, "err", err)
			what := p.Controller
			if what == "cpu" {
				what = "cpu_millis"
			}
			l.Unenforced = append(l.Unenforced, what)
			continue
		}
		if p.Controller == "memory" {
			caps.Memsw = fileExists(filepath.Join(p.Dir, "memory.memsw.limit_in_bytes"))
		}
		kept = append(kept, p)
	}
	l.Parents = kept
	return caps, l, nil
}

// makeParent makes a parent cgroup, removing the children a crashed run
// left in it (those still busy stay, and are logged).
func makeParent(dir string, log *slog.Logger) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		child := filepath.Join(dir, e.Name())
		if err := os.Remove(child); err != nil {
			log.Warn("a cgroup left by an earlier run of this executor is busy", "cgroup", child, "err", err)
		} else {
			log.Info("removed a cgroup left by an earlier run of this executor", "cgroup", child)
		}
	}
	return nil
}

// enforced reports whether tasks get cgroups.
func (cg *cgroups) enforced() bool { return cg.layout.Version != cgroupNone }

// logMode says at start which mode is in use.
func (cg *cgroups) logMode(cpuMillis, memoryMB int64) {
	if !cg.enforced() {
		cg.log.Warn("task resources are not enforced: a task may use more CPU and memory than it declares",
			"why", cg.why, "cpu_millis", cpuMillis, "memory_mb", memoryMB)
		return
	}
	dirs := make([]string, len(cg.layout.Parents))
	for i, p := range cg.layout.Parents {
		dirs[i] = p.Dir
	}
	attrs := []any{"cgroups", strings.Join(dirs, ","), "pids_max", cg.pidsMax, "cpu_millis", cpuMillis, "memory_mb", memoryMB}
	if len(cg.layout.Unenforced) > 0 {
		attrs = append(attrs, "unenforced", strings.Join(cg.layout.Unenforced, ","))
	}
	if cg.why != "" {
		attrs = append(attrs, "not_v2", cg.why)
	}
	cg.log.Info("task resources are enforced with "+cg.layout.Version.String(), attrs...)
}

// childDirs are execution id's cgroup directories, one per parent.
func (cg *cgroups) childDirs(id string) []cgroupParent {
	out := make([]cgroupParent, len(cg.layout.Parents))
	for i, p := range cg.layout.Parents {
		out[i] = cgroupParent{Controller: p.Controller, Dir: filepath.Join(p.Dir, cgroupChild(id))}
	}
	return out
}

// create makes execution id's cgroups with the limits of res and returns
// their directories, for the task to join. A cgroup left by an earlier
// start of the same execution is replaced (an old OOM count must not
// fail the new task); one still busy is an error.
func (cg *cgroups) create(id string, res wire.Resources) ([]string, error) {
	if !cg.enforced() {
		return nil, nil
	}
	children := cg.childDirs(id)
	dirs := make([]string, 0, len(children))
	fail := func(err error) ([]string, error) {
		for _, d := range dirs {
			_ = os.Remove(d)
		}
		return nil, fmt.Errorf("task cgroup: %w", err)
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	for _, c := range children {
		if err := cg.makeChild(c.Dir); err != nil {
			return fail(err)
		}
		dirs = append(dirs, c.Dir)
	}
	for _, f := range cgroupLimits(cg.layout, cg.caps, res, cg.pidsMax) {
		dir := children[0].Dir
		for _, c := range children {
			if c.Controller == f.Controller {
				dir = c.Dir
			}
		}
		if err := writeCgroupFile(filepath.Join(dir, f.Name), f.Value); err != nil {
			return fail(err)
		}
	}
	return dirs, nil
}

// makeChild makes child cgroup dir, and its parent if it is not there
// (the first task's, or the shims of a killed run removed it meanwhile).
// A child left by an earlier start of the same execution is replaced.
// Called with mu held.
func (cg *cgroups) makeChild(dir string) error {
	for try := 0; ; try++ {
		err := os.Mkdir(dir, 0o755)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, fs.ErrNotExist) && try < 2:
			err = os.Mkdir(filepath.Dir(dir), 0o755)
			if err == nil && cg.layout.Version == cgroupV2 {
				err = writeCgroupFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"), v2SubtreeControl)
			}
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		case errors.Is(err, fs.ErrExist) && try < 2:
			if err := os.Remove(dir); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// oomKills is how many of execution id's processes the OOM killer has
// killed (0 if unknown or not enforced).
func (cg *cgroups) oomKills(id string) int64 {
	if !cg.layout.has("memory") {
		return 0
	}
	name := "memory.oom_control"
	if cg.layout.Version == cgroupV2 {
		name = "memory.events"
	}
	for _, c := range cg.childDirs(id) {
		if c.Controller != "" && c.Controller != "memory" {
			continue
		}
		s, err := readBounded(filepath.Join(c.Dir, name), maxCgroupFile)
		if err != nil {
			cg.log.Warn("reading a task's OOM count", "execution", id, "err", err)
			return 0
		}
		n, _ := parseOOMKills(s)
		return n
	}
	return 0
}

// remove kills what is left in execution id's cgroups (a process that
// left the task's process group) and removes them, waiting a bounded
// time for the killed to leave; one still busy then is logged and left
// for the next collection (sweep). The parents go too if that was the
// last child.
func (cg *cgroups) remove(id string) {
	for _, c := range cg.childDirs(id) {
		if err := removeCgroup(c.Dir, time.Now().Add(cgroupRemoveWait)); err != nil {
			cg.log.Warn("removing a task's cgroup", "execution", id, "cgroup", c.Dir, "err", err)
		}
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	for _, p := range cg.layout.Parents {
		_ = os.Remove(p.Dir) // fails while other tasks have children there
	}
}

// sweep kills what is in every child cgroup not kept (by name) and
// removes it, trying once: a child whose task has ended but whose removal
// failed then (a process was slow to die) is gone by the next sweep.
func (cg *cgroups) sweep(keep func(name string) bool) {
	for _, p := range cg.layout.Parents {
		entries, err := os.ReadDir(p.Dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // none while no task runs
				cg.log.Warn("listing the executor's cgroup", "cgroup", p.Dir, "err", err)
			}
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || keep(e.Name()) {
				continue
			}
			dir := filepath.Join(p.Dir, e.Name())
			killCgroup(dir)
			if err := os.Remove(dir); err != nil {
				cg.log.Warn("removing a leftover task cgroup", "cgroup", dir, "err", err)
			} else {
				cg.log.Info("removed a leftover task cgroup", "cgroup", dir)
			}
		}
	}
}

// close removes the parent cgroups (and any child still there).
func (cg *cgroups) close() {
	for _, p := range cg.layout.Parents {
		entries, _ := os.ReadDir(p.Dir)
		for _, e := range entries {
			if e.IsDir() {
				if err := removeCgroup(filepath.Join(p.Dir, e.Name()), time.Now().Add(cgroupRemoveWait)); err != nil {
					cg.log.Warn("removing a task's cgroup", "cgroup", filepath.Join(p.Dir, e.Name()), "err", err)
				}
			}
		}
		if err := os.Remove(p.Dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			cg.log.Warn("removing the executor's cgroup", "cgroup", p.Dir, "err", err)
		}
	}
}

// removeCgroup kills every process in cgroup dir and removes it, trying
// until deadline.
func removeCgroup(dir string, deadline time.Time) error {
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		killCgroup(dir)
		time.Sleep(wait) // no event says a v1 cgroup has emptied
	}
}

// removeOrphanCgroups is a shim's removal of its task's cgroups when its
// executor died: it kills what is left in them, removes them, and then
// their parents, which only the last one empties.
func removeOrphanCgroups(dirs []string) {
	deadline := time.Now().Add(cgroupRemoveWait)
	for _, d := range dirs {
		killCgroup(d)
		if removeCgroup(d, deadline) == nil {
			_ = os.Remove(filepath.Dir(d))
		}
	}
}

// killCgroup SIGKILLs every process in cgroup dir (v2's cgroup.kill
// where there is one).
func killCgroup(dir string) {
	if writeCgroupFile(filepath.Join(dir, "cgroup.kill"), "1") == nil {
		return
	}
	s, err := readBounded(filepath.Join(dir, "cgroup.procs"), maxCgroupFile)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(s) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// joinCgroups moves the calling process into cgroup dirs (RunShim's
// --exec-in, before it runs the task's command).
func joinCgroups(dirs []string) error {
	pid := strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		if err := writeCgroupFile(filepath.Join(d, "cgroup.procs"), pid); err != nil {
			return err
		}
	}
	return nil
}

// writeCgroupFile writes value into an existing cgroup file.
func writeCgroupFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(value); err != nil {
		f.Close()
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return f.Close()
}

// readBounded reads at most max bytes of path; a longer file is an error.
func readBounded(path string, max int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return "", err
	}
	if int64(len(b)) > max {
		return "", fmt.Errorf("%s is longer than %d bytes", path, max)
	}
	return string(b), nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
