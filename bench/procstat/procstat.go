// Package procstat reads a process's CPU time and resident memory from
// /proc/<pid>/stat (Linux), the way top and ps do.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of the CPU times in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports.
const clockTick = 100

// Sample is one reading of a process.
type Sample struct {
	At time.Time
	// CPU is user plus system time consumed since the process started.
	CPU time.Duration
	// ChildCPU is the same for its children that have ended and been waited
	// for (an executor's task processes).
	ChildCPU time.Duration
	// RSS is the resident set size in bytes.
	RSS int64
}

// Read samples process pid.
func Read(pid int) (Sample, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Sample{}, err
	}
	now := time.Now()
	// pid (comm) state ppid ...: comm may hold spaces and parentheses, so
	// fields are counted from the last ')'. After it, field 3 (state) is
	// f[0], utime (14) is f[11], stime (15) f[12], cutime and cstime (16,
	// 17) f[13] and f[14], and rss (24) f[21].
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Sample{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return Sample{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	cutime, err3 := strconv.ParseInt(f[13], 10, 64)
	cstime, err4 := strconv.ParseInt(f[14], 10, 64)
	rss, err5 := strconv.ParseInt(f[21], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
		return Sample{}, fmt.Errorf("/proc/%d/stat: bad numbers", pid)
	}
	return Sample{
		At:       now,
		CPU:      time.Duration(utime+stime) * time.Second / clockTick,
		ChildCPU: time.Duration(cutime+cstime) * time.Second / clockTick,
		RSS:      rss * int64(os.Getpagesize()),
	}, nil
}

// Cores is the CPU used between two samples of one process, in cores (1.0
// is one core busy all the time).
func Cores(from, to Sample) float64 {
	wall := to.At.Sub(from.At)
	if wall <= 0 {
		return 0
	}
	return float64(to.CPU-from.CPU) / float64(wall)
}

// ChildCores is Cores for the children's CPU.
func ChildCores(from, to Sample) float64 {
	wall := to.At.Sub(from.At)
	if wall <= 0 {
		return 0
	}
	return float64(to.ChildCPU-from.ChildCPU) / float64(wall)
}
