package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procInfo is one process as /proc shows it.
type procInfo struct {
	pid, ppid, pgid int
	state           byte
}

func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procInfo{}, false
	}
	// pid (comm) state ppid pgrp ...; comm may contain spaces and parens.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return procInfo{}, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgid, _ := strconv.Atoi(f[2])
	return procInfo{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0]}, true
}

func allProcs() []procInfo {
	ents, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok && p.state != 'Z' {
			out = append(out, p)
		}
	}
	return out
}

// descendants returns the live (non-zombie) descendants of pid.
func descendants(pid int) []int {
	children := make(map[int][]int)
	for _, p := range allProcs() {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// processesWithEnv returns the pids of live processes whose environment
// contains the given KEY=VALUE: how a test finds task processes wherever
// they were reparented.
func processesWithEnv(kv string) []int {
	var out []int
	for _, p := range allProcs() {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "environ"))
		if err != nil {
			continue
		}
		for _, e := range strings.Split(string(b), "\x00") {
			if e == kv {
				out = append(out, p.pid)
				break
			}
		}
	}
	return out
}

func signalAll(pids []int, sig syscall.Signal) {
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

// procEnv reads a process's environment (empty if it is gone).
func procEnv(pid int) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return out
	}
	for _, e := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(e, "="); ok {
			out[k] = v
		}
	}
	return out
}
