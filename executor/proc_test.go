package executor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// procInfo is what /proc/<pid>/stat says about a process.
type procInfo struct {
	state string
	ppid  int
	pgrp  int
}

func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	return procInfo{state: f[0], ppid: ppid, pgrp: pgrp}, true
}

// groupMembers lists the processes of group pgid that are not zombies
// (zombies have exited; whoever adopted them may never reap them).
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok && p.pgrp == pgid && p.state != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// pgidOf reads the process group of a live process. If the test fails,
// whatever is left of that group is killed when it ends.
func pgidOf(t testing.TB, pid int) int {
	p, ok := readProc(pid)
	require.True(t, ok, "process %d is gone", pid)
	t.Cleanup(func() {
		if t.Failed() && len(groupMembers(p.pgrp)) > 0 {
			_ = syscall.Kill(-p.pgrp, syscall.SIGKILL)
		}
	})
	return p.pgrp
}

// firstLinePID waits for the task's stdout to start with a pid (tasks print
// `echo $$` first) and returns it.
func (l *leader) firstLinePID(id string) int {
	var pid int
	waitFor(l.t, id+" to print its pid", func() bool {
		var ok bool
		pid, ok = l.printedPID(id)
		return ok
	})
	return pid
}

// printedPID is the pid the task's stdout starts with, if it has printed
// it yet.
func (l *leader) printedPID(id string) (int, bool) {
	line, _, ok := strings.Cut(l.logs(id, "stdout"), "\n")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil
}
