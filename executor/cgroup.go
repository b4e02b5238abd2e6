package executor

import (
	"os"
	"strings"
)

// Tasks' declared resources steer placement; this executor does not cap
// them. What the host would allow is checked once at start and said in
// the log, so an operator knows a task may use more than it declared.

// cgroupRoot is where a cgroup v2 hierarchy is mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupControllers are the controllers that capping a task's CPU,
// memory and processes needs.
var cgroupControllers = []string{"cpu", "memory", "pids"}

// cgroupSupport decides, from the contents of the v2 hierarchy's
// cgroup.controllers (found: whether it exists), what the host offers for
// capping tasks: ok, or why not.
func cgroupSupport(found bool, controllers string) (ok bool, why string) {
	if !found {
		return false, "no cgroup v2 hierarchy at " + cgroupRoot + " (a cgroup v1 or hybrid host)"
	}
	have := make(map[string]bool)
	for _, c := range strings.Fields(controllers) {
		have[c] = true
	}
	var missing []string
	for _, c := range cgroupControllers {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return false, "the cgroup v2 hierarchy at " + cgroupRoot + " lacks the " + strings.Join(missing, ", ") + " controller(s)"
	}
	return true, ""
}

// logEnforcement says at start that tasks' resources are not enforced,
// and what the host offers.
func (e *Executor) logEnforcement() {
	if e.cfg.Runtime != RuntimeExec {
		return
	}
	b, err := os.ReadFile(cgroupRoot + "/cgroup.controllers")
	ok, why := cgroupSupport(err == nil, string(b))
	if !ok {
		e.log.Warn("task resources are not enforced: a task may use more CPU and memory than it declares", "why", why,
			"cpu_millis", e.cfg.CPUMillis, "memory_mb", e.cfg.MemoryMB)
		return
	}
	e.log.Warn("task resources are not enforced: a task may use more CPU and memory than it declares (this executor does not cap tasks with cgroups)",
		"cpu_millis", e.cfg.CPUMillis, "memory_mb", e.cfg.MemoryMB)
}
