package executor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"jobmaster/wire"
)

// The exec runtime enforces the resources a task declares with cgroups.
// This file holds the decisions, all pure; cgroup_io.go carries them out.
//
// Vocabulary:
//   - hierarchy: a mounted cgroup tree. cgroup v2 has one (unified), with
//     every controller in it; cgroup v1 has one per controller (memory,
//     cpu, pids, ...). A hybrid host has both, each controller in one.
//   - layout: where this executor's cgroups go. Its parent cgroup
//     (cgroupName: the node id and a hash of the data directory, so that
//     two executors on one host never share one) has one child per
//     running execution (cgroupChild), in each hierarchy used.
//   - limits: the files written into a child before its task runs
//     (cgroupLimits). A kind of resource the task did not declare is not
//     limited; every task gets the pids limit (Config.TaskPidsMax).
//
// Choice (cgroupCandidates, tried in order by setupCgroups): cgroup v2
// where its hierarchy offers the cpu, memory and pids controllers; else
// cgroup v1 where the memory controller is mounted (cpu and pids are used
// where they are mounted too); else none, and the start log says why.

// cgroupVersion is which kind of hierarchy a layout uses.
type cgroupVersion int

const (
	cgroupNone cgroupVersion = iota
	cgroupV1
	cgroupV2
)

func (v cgroupVersion) String() string {
	switch v {
	case cgroupV1:
		return "cgroup v1"
	case cgroupV2:
		return "cgroup v2"
	}
	return "none"
}

// cgroupControllers are the controllers that capping a task's CPU,
// memory and processes needs.
var cgroupControllers = []string{"cpu", "memory", "pids"}

// v2SubtreeControl enables them for a v2 cgroup's children.
const v2SubtreeControl = "+cpu +memory +pids"

// CPU bandwidth: a task may use quota µs of CPU time per period.
const (
	cpuPeriodUS   = 100_000
	minCPUQuotaUS = 1_000 // the kernel's smallest quota
)

// DefaultTaskPidsMax is how many processes and threads one task may have
// at once (Config.TaskPidsMax): a fork bomb stops there.
const DefaultTaskPidsMax = 4096

// cgroupMount is a mounted hierarchy: its mount point, and the cgroup
// path that the mount point shows (the mountinfo root: "/" unless a
// container sees only part of the hierarchy).
type cgroupMount struct {
	Point, Root string
}

// cgroupMounts is where the host's hierarchies are mounted.
type cgroupMounts struct {
	V2 *cgroupMount           // the cgroup2 mount, nil if none
	V1 map[string]cgroupMount // v1 controller (memory, cpu, pids) -> its hierarchy's mount
}

// parseCgroupMounts reads /proc/self/mountinfo's lines: the first cgroup2
// mount, and the first mount of each v1 hierarchy that holds one of
// cgroupControllers.
func parseCgroupMounts(mountinfo string) cgroupMounts {
	m := cgroupMounts{V1: make(map[string]cgroupMount)}
	for _, line := range strings.Split(mountinfo, "\n") {
		// id parent major:minor root point options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		mnt := cgroupMount{Point: unescapeMount(f[4]), Root: unescapeMount(f[3])}
		switch g[0] {
		case "cgroup2":
			if m.V2 == nil {
				m.V2 = &mnt
			}
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				for _, c := range cgroupControllers {
					if _, seen := m.V1[c]; opt == c && !seen {
						m.V1[c] = mnt
					}
				}
			}
		}
	}
	return m
}

// unescapeMount undoes mountinfo's octal escapes (\040 is a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseProcCgroup reads /proc/self/cgroup's lines ("id:controllers:path"):
// the process's cgroup path per v1 controller, and under "" its v2 path.
func parseProcCgroup(s string) map[string]string {
	own := make(map[string]string)
	for _, line := range strings.Split(s, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own
}

// cgroupName is the name of an executor's parent cgroup: its node id
// (made safe for a file name) and a hash of its data directory, which no
// other executor on the host shares.
func cgroupName(nodeID, dataDir string) string {
	safe := []byte(nodeID)
	for i, c := range safe {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			safe[i] = '_'
		}
	}
	if len(safe) > 64 {
		safe = safe[:64]
	}
	sum := sha256.Sum256([]byte(dataDir))
	return "jobmaster-" + string(safe) + "-" + hex.EncodeToString(sum[:4])
}

// cgroupChild is the name of an execution's cgroup: its id with ':' for
// '/' (no component holds a ':'), or, for an id too long for a file
// name, "x-" and a hash of it.
func cgroupChild(executionID string) string {
	if len(executionID) <= 200 {
		return strings.ReplaceAll(executionID, "/", ":")
	}
	sum := sha256.Sum256([]byte(executionID))
	return "x-" + hex.EncodeToString(sum[:16])
}

// cgroupParent is an executor's parent cgroup in one hierarchy: the v1
// controller it is for ("" on v2), and its directory.
type cgroupParent struct {
	Controller, Dir string
}

// cgroupLayout is where an executor's cgroups go.
type cgroupLayout struct {
	Version cgroupVersion
	// Parents: on v2 one, for every controller; on v1 one per controller
	// used, memory first.
	Parents []cgroupParent
	// Unenforced names what is not limited on v1 because its controller
	// is not mounted ("cpu_millis", "pids").
	Unenforced []string
}

// has reports whether l limits controller c.
func (l cgroupLayout) has(c string) bool {
	for _, p := range l.Parents {
		if p.Controller == "" || p.Controller == c {
			return true
		}
	}
	return false
}

// cgroupCandidates lists the layouts to try, best first, given the
// host's mounts, the process's own cgroups (parseProcCgroup) and the v2
// hierarchy's cgroup.controllers; why says why a better one is missing.
// The v2 parent is at the top of the hierarchy (a v2 cgroup that holds
// processes, as the executor's own does, cannot give its children
// controllers); a v1 parent is under the executor's own cgroup, so that
// limits set above it still hold.
func cgroupCandidates(m cgroupMounts, own map[string]string, v2Controllers, name string) (cands []cgroupLayout, why []string) {
	switch {
	case m.V2 == nil:
		why = append(why, "no cgroup v2 hierarchy")
	default:
		have := make(map[string]bool)
		for _, c := range strings.Fields(v2Controllers) {
			have[c] = true
		}
		var missing []string
		for _, c := range cgroupControllers {
			if !have[c] {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			why = append(why, "the cgroup v2 hierarchy at "+m.V2.Point+" lacks the "+strings.Join(missing, ", ")+" controller(s)")
		} else {
			cands = append(cands, cgroupLayout{Version: cgroupV2, Parents: []cgroupParent{{Dir: m.V2.Point + "/" + name}}})
		}
	}
	v1 := cgroupLayout{Version: cgroupV1}
	for _, c := range []string{"memory", "cpu", "pids"} {
		mnt, ok := m.V1[c]
		var dir string
		if ok {
			dir, ok = v1Dir(mnt, own[c])
		}
		switch {
		case ok:
			v1.Parents = append(v1.Parents, cgroupParent{Controller: c, Dir: dir + "/" + name})
		case c == "memory":
			why = append(why, "no cgroup v1 memory controller mounted")
			return cands, why
		case c == "cpu":
			v1.Unenforced = append(v1.Unenforced, "cpu_millis")
		default:
			v1.Unenforced = append(v1.Unenforced, c)
		}
	}
	return append(cands, v1), why
}

// v1Dir is the directory of cgroup path own in the hierarchy mounted at
// mnt, if the mount shows it.
func v1Dir(mnt cgroupMount, own string) (string, bool) {
	if own == "" {
		own = "/"
	}
	rel, ok := strings.CutPrefix(own, mnt.Root)
	if !ok || mnt.Root != "/" && rel != "" && rel[0] != '/' {
		return "", false
	}
	return strings.TrimRight(mnt.Point+"/"+strings.Trim(rel, "/"), "/"), true
}

// cgroupCaps are optional files a layout's cgroups have.
type cgroupCaps struct {
	// Swap: v2 memory.swap.max exists (the kernel accounts swap).
	Swap bool
	// Memsw: v1 memory.memsw.limit_in_bytes exists.
	Memsw bool
}

// cgroupFile is a value to write into a child cgroup: the controller
// whose child it goes to ("" on v2), the file's name, and the value.
type cgroupFile struct {
	Controller, Name, Value string
}

// cgroupLimits are the files to write, in order, into an execution's
// cgroups so that its task uses at most res (and pidsMax processes; 0: no
// bound). Memory is capped without swap; CPU time at cpu_millis per second.
func cgroupLimits(l cgroupLayout, caps cgroupCaps, res wire.Resources, pidsMax int64) []cgroupFile {
	var out []cgroupFile
	add := func(c, name, value string) {
		if l.Version == cgroupV2 {
			c = ""
		}
		out = append(out, cgroupFile{c, name, value})
	}
	if res.MemoryMB > 0 && l.has("memory") {
		bytes := strconv.FormatInt(res.MemoryMB<<20, 10)
		switch l.Version {
		case cgroupV2:
			add("memory", "memory.max", bytes)
			if caps.Swap {
				add("memory", "memory.swap.max", "0")
			}
		case cgroupV1:
			add("memory", "memory.limit_in_bytes", bytes)
			if caps.Memsw { // memory and swap together: no swap
				add("memory", "memory.memsw.limit_in_bytes", bytes)
			}
		}
	}
	if res.CPUMillis > 0 && l.has("cpu") {
		quota := strconv.FormatInt(max(res.CPUMillis*cpuPeriodUS/1000, minCPUQuotaUS), 10)
		period := strconv.Itoa(cpuPeriodUS)
		switch l.Version {
		case cgroupV2:
			add("cpu", "cpu.max", quota+" "+period)
		case cgroupV1:
			add("cpu", "cpu.cfs_period_us", period)
			add("cpu", "cpu.cfs_quota_us", quota)
		}
	}
	if pidsMax > 0 && l.has("pids") {
		add("pids", "pids.max", strconv.FormatInt(pidsMax, 10))
	}
	return out
}

// parseOOMKills reads the oom_kill count from a cgroup's v2
// memory.events or v1 memory.oom_control ("key value" lines); ok is false
// if there is none.
func parseOOMKills(s string) (n int64, ok bool) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "oom_kill" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			return n, err == nil && n >= 0
		}
	}
	return 0, false
}

// oomVerdict decides whether a task that exited with code ran out of
// memory: it failed, and the OOM killer killed kills of the processes in
// its cgroup. It returns the failure's message, or "" if the task did not.
// A task that handled the kill and exited 0 did not fail.
func oomVerdict(code int, kills, memoryMB int64) string {
	if code == 0 || kills <= 0 {
		return ""
	}
	killed := fmt.Sprintf("the OOM killer killed %d of its processes", kills)
	if memoryMB <= 0 {
		return fmt.Sprintf("out of memory: %s (exit status %d)", killed, code)
	}
	return fmt.Sprintf("out of memory: exceeded its memory_mb of %d (%s; exit status %d)", memoryMB, killed, code)
}
