package executor

import (
	"bufio"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
)

// The capacity an executor offers for tasks' resources (Config.CPUMillis,
// Config.MemoryMB) defaults to its host's: every CPU the process may run
// on, and all the memory /proc/meminfo counts.

// HostCapacity is what an executor on this host offers by default: its
// CPUs in thousandths of a core, and its memory in MiB (0 if unknown).
func HostCapacity() (cpuMillis, memoryMB int64) { return hostCPUMillis(), hostMemoryMB() }

// hostCPUMillis is the host's CPUs in thousandths of a core.
func hostCPUMillis() int64 { return int64(goruntime.NumCPU()) * 1000 }

// hostMemoryMB is the host's memory in MiB, 0 if unknown.
func hostMemoryMB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseMemTotal(bufio.NewScanner(f))
}

// parseMemTotal reads MemTotal (kB) from /proc/meminfo's lines, in MiB.
func parseMemTotal(sc *bufio.Scanner) int64 {
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0
		}
		return kb / 1024
	}
	return 0
}
