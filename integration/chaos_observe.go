package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// What a chaos run observes besides the history: stray task processes
// during the run, and the product's mechanisms at work in the logs.

// strayWatch samples, during the run, task processes whose execution the
// leader does not expect live (ended, superseded or unknown), and measures
// how long each keeps running. Stopped (frozen) processes make no progress
// and are not counted. This measures property 5 of the design (an
// unexpected execution is cancelled within a heartbeat of being reported)
// under faults; it is reported, not asserted: the final stray-process
// check, after the cluster is quiet, is the property.
type strayWatch struct {
	c     *Cluster
	tag   string
	first map[int]strayLife // by pid
	last  map[int]time.Time
}

type strayLife struct {
	Execution, Executor string
	Pid                 int
	From                time.Time
	For                 time.Duration
}

func (s strayLife) String() string {
	if s.Pid == 0 {
		return "none seen"
	}
	return fmt.Sprintf("%s (%s on %s, pid %d, from %s)", s.For.Round(time.Millisecond), s.Execution, s.Executor, s.Pid, s.From.Format("15:04:05.000"))
}

func newStrayWatch(c *Cluster, tag string) *strayWatch {
	return &strayWatch{c: c, tag: tag, first: map[int]strayLife{}, last: map[int]time.Time{}}
}

func (s *strayWatch) sample() {
	procs := taskProcesses(s.tag)
	jobs := map[string]map[string]bool{} // job -> live executions
	for _, p := range procs {
		job := strings.SplitN(p.Execution, "/", 2)[0]
		if _, ok := jobs[job]; ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		j, err := s.c.Client.Job(ctx, job)
		cancel()
		if err != nil {
			jobs[job] = nil // unknown this time: judge nothing
			continue
		}
		live := map[string]bool{}
		for _, v := range j.Vertices {
			for _, st := range v.Subtasks {
				if !st.State.Terminal() {
					live[st.ExecutionID] = true
				}
			}
		}
		jobs[job] = live
	}
	now := time.Now()
	for _, p := range procs {
		live := jobs[strings.SplitN(p.Execution, "/", 2)[0]]
		if live == nil || live[p.Execution] {
			continue
		}
		// Still there, not frozen, and the same execution after the read?
		// (A frozen task's shell may show D, not T: stopped in the middle
		// of a vfork, its child stopped before exec.)
		if n := s.c.Node(p.Executor); n == nil || n.FrozenPids() != nil {
			continue
		}
		info, ok := readProc(p.Pid)
		if !ok || info.state == 'T' || procEnv(p.Pid)["JOBMASTER_EXECUTION_ID"] != p.Execution {
			continue
		}
		if _, seen := s.first[p.Pid]; !seen {
			s.first[p.Pid] = strayLife{Execution: p.Execution, Executor: p.Executor, Pid: p.Pid, From: now}
		}
		s.last[p.Pid] = now
	}
}

// longest is the stray process that ran longest while unexpected.
func (s *strayWatch) longest() strayLife {
	var out strayLife
	for pid, f := range s.first {
		f.For = s.last[pid].Sub(f.From)
		if out.Pid == 0 || f.For > out.For {
			out = f
		}
	}
	return out
}

// mechanisms are log messages that show a fault-tolerance mechanism at
// work, for the report: a run in which none of them appears proves little.
// raft marks the messages hashicorp/raft logs (not the product's code).
var mechanisms = []struct {
	label, msg string
	raft       bool
}{
	{"leaderships established (elections won)", `msg="leadership established"`, false},
	{"executors declared lost", `msg="executor lost: its executions ended"`, false},
	{"reports with missing or expired executions", `msg="executions failed"`, false},
	{"unknown executions cancelled on executors", `msg="cancelling executions"`, false},
	{"requests executors refused from a stale leader", `msg="refused a request from a stale leader"`, false},
	{"lease expiries (executor self-fencing)", `SELF-FENCING: `, false},
	{"paused leaders that noticed the pause", `msg="leader was paused; restarting executor timeouts"`, false},
	// A deposed leader's entries that were never replicated, replaced by
	// the new leader's: the precondition of the commit hazard in
	// integration/raftcommit_test.go.
	{"deposed leaders' unreplicated entries replaced (Raft: clearing log suffix)", `clearing log suffix`, true},
}

func exercised(c *Cluster) []string {
	counts := make([]int, len(mechanisms))
	for _, n := range append(append([]*Node{}, c.Masters...), c.Executors...) {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			continue
		}
		for i, m := range mechanisms {
			counts[i] += strings.Count(string(b), m.msg)
		}
	}
	var out []string
	for i, m := range mechanisms {
		out = append(out, fmt.Sprintf("%s: %d", m.label, counts[i]))
	}
	return out
}
