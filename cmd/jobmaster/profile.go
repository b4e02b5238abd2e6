package main

import (
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// profileEnv names a file that a server writes a CPU profile of its first
// profileForEnv (default 10s) to, "%p" in it replaced by the process id:
// how the benchmarks' real processes are profiled (docs/BENCHMARKS.md,
// "Profiling"). The profile is written when that time is up, so a process
// killed later keeps it.
const (
	profileEnv    = "JOBMASTER_CPUPROFILE"
	profileForEnv = "JOBMASTER_CPUPROFILE_FOR"
)

// startProfile starts the CPU profile that getenv asks for, if any.
func startProfile(getenv func(string) string, logf func(format string, args ...any)) {
	file := getenv(profileEnv)
	if file == "" {
		return
	}
	d := 10 * time.Second
	if v := getenv(profileForEnv); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			logf("%s: %v; profiling for %s", profileForEnv, err, 10*time.Second)
			d = 10 * time.Second
		}
	}
	f, err := os.Create(strings.ReplaceAll(file, "%p", strconv.Itoa(os.Getpid())))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		logf("%s: %v", profileEnv, err)
		return
	}
	time.AfterFunc(d, func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			logf("%s: %v", profileEnv, err)
		}
	})
}
