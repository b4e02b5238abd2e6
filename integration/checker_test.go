package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/api"
	"jobmaster/wire"
)

// ms is a time in unix nanoseconds, n milliseconds after an arbitrary base.
func ms(n int64) int64 { return 1_700_000_000_000_000_000 + n*int64(time.Millisecond) }

func ev(kind, exec string, atMs int64, executor string, pid int) Event {
	return Event{Kind: kind, Execution: exec, At: ms(atMs), Executor: executor, Pid: pid}
}

// life is a run's records: start at from, alive every 150 ms, then last.
func life(exec, executor string, pid int, from, to int64, last string) []Event {
	out := []Event{ev("start", exec, from, executor, pid)}
	for t := from + 150; t < to; t += 150 {
		out = append(out, ev("alive", exec, t, executor, pid))
	}
	return append(out, ev(last, exec, to, executor, pid))
}

func finalJob(id, status string, endMs int64, attempts ...int) *api.Job {
	j := &api.Job{ID: id, Status: status, EndTime: endMs}
	v := api.Vertex{ID: "v", Parallelism: len(attempts)}
	for i, a := range attempts {
		v.Subtasks = append(v.Subtasks, api.Subtask{Index: i, Attempt: a, State: wire.State(status)})
	}
	j.Vertices = []api.Vertex{v}
	return j
}

func summaries(pairs ...string) []api.JobSummary {
	var out []api.JobSummary
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, api.JobSummary{ID: pairs[i], Status: pairs[i+1]})
	}
	return out
}

// healthy is a run where everything held: two jobs, three masters agreeing,
// a subtask restarted after its first attempt ended.
func healthy() CheckInput {
	var h []Event
	h = append(h, life("a/v/0/0", "e1", 10, 0, 600, "fail")...)
	h = append(h, life("a/v/0/1", "e2", 11, 700, 1500, "end")...)
	h = append(h, life("b/v/0/0", "e1", 12, 0, 900, "end")...)
	jobs := summaries("a", "FINISHED", "b", "FINISHED")
	return CheckInput{
		Jobs: []JobRecord{
			{ID: "a", Kind: "flaky", Want: WantFinished, MaxAttempt: -1, Acked: true},
			{ID: "b", Kind: "steady", Want: WantFinished, MaxAttempt: 3, Acked: true, NoFailures: true, Submitted: ms(-100)},
		},
		Final: map[string]*api.Job{"a": finalJob("a", "FINISHED", 1500, 1), "b": finalJob("b", "FINISHED", 900, 0)},
		Masters: []MasterSnapshot{
			{ID: "m1", Jobs: jobs, Applied: 40, Hash: "h"},
			{ID: "m2", Jobs: jobs, Applied: 40, Hash: "h"},
			{ID: "m3", Jobs: jobs, Applied: 40, Hash: "h"},
		},
		History:        h,
		ExpectedLive:   map[string]bool{},
		Tokens:         []TokenSample{{"e1", 0, 1, 5}, {"e1", 0, 2, 9}},
		Slack:          100 * time.Millisecond,
		FenceAllowance: time.Second,
	}
}

// alsoViolated names a second property a change violates by necessity.
var alsoViolated = map[string]string{
	"acked job lost on one master":                 PropSameHash,
	"acked job missing on a master that is behind": PropSameHash,
	"same execution run twice at once":             PropNoSpurious,
	"healthy job failed":                           PropNoSpurious,
	"job stuck running":                            PropNoSpurious,
	"uncancelled job canceled":                     PropNoSpurious,
}

func TestCheckerFindsEachViolation(t *testing.T) {
	tests := []struct {
		name   string
		change func(in *CheckInput)
		prop   string
		detail string // a fragment of the violation's detail
	}{
		{"healthy run", func(*CheckInput) {}, "", ""},
		{"acked job lost on one master", func(in *CheckInput) {
			in.Masters[2].Jobs = summaries("b", "FINISHED")
		}, PropAckedDurable, "acknowledged job a is missing on master m3: APART: m3 read its list at applied index 40, at or above m1's 40"},
		{"acked job missing on a master that is behind", func(in *CheckInput) {
			in.Masters[2].Jobs = summaries("b", "FINISHED")
			in.Masters[2].Applied, in.Masters[2].Hash = 30, "h30"
			in.HashSamples = []HashSample{{Node: "m1", Applied: 30, Hash: "h30"}}
		}, PropAckedDurable, "acknowledged job a is missing on master m3: BEHIND: m3 read its list at applied index 30, below m1's 40"},
		{"acked job answered 404 later", func(in *CheckInput) {
			in.NotFounds = []NotFound{{Job: "a", Master: "m2", At: ms(300)}}
		}, PropAckedDurable, "master m2 answered 404 (not found) for acknowledged job a"},
		{"job listed twice", func(in *CheckInput) {
			in.Masters[0].Jobs = append(in.Masters[0].Jobs, api.JobSummary{ID: "a", Status: "FINISHED"})
		}, PropExistsOnce, "lists job a 2 times"},
		{"job nobody submitted", func(in *CheckInput) {
			for i := range in.Masters {
				in.Masters[i].Jobs = append(in.Masters[i].Jobs, api.JobSummary{ID: "ghost", Status: "RUNNING"})
			}
		}, PropExistsOnce, "ghost, which the workload never submitted"},
		{"retried submit answered conflict", func(in *CheckInput) {
			in.Jobs[0].Conflicts = 1
		}, PropExistsOnce, "409"},
		{"job stuck running", func(in *CheckInput) {
			in.Final["b"] = finalJob("b", "RUNNING", 0, 0)
		}, PropTerminal, "job b is still RUNNING"},
		{"job unreadable", func(in *CheckInput) {
			delete(in.Final, "b")
		}, PropTerminal, "could not be read"},
		{"healthy job failed", func(in *CheckInput) {
			in.Final["b"] = finalJob("b", "FAILED", 900, 0)
		}, PropOutcome, "job b (steady) is FAILED, expected FINISHED"},
		{"doomed job finished", func(in *CheckInput) {
			in.Jobs[1].Want = WantFailed
		}, PropOutcome, "is FINISHED, expected FAILED"},
		{"cancelled job finished after the cancel", func(in *CheckInput) {
			in.Jobs[1].CancelAcked = 500
		}, PropOutcome, "though its cancel was acknowledged at 500 ms"},
		{"uncancelled job canceled", func(in *CheckInput) {
			in.Final["b"] = finalJob("b", "CANCELED", 900, 0)
		}, PropOutcome, "nobody cancelled it"},
		{"budget exceeded in the final view", func(in *CheckInput) {
			in.Final["b"] = finalJob("b", "FINISHED", 900, 4)
		}, PropRestartBudget, "reached attempt 4, the strategy allows 3"},
		{"budget exceeded in the history", func(in *CheckInput) {
			in.Jobs[1].NoFailures = false
			in.History = append(in.History, life("b/v/0/5", "e2", 20, 2000, 2300, "end")...)
		}, PropRestartBudget, "execution b/v/0/5 ran"},
		{"two attempts alive at once", func(in *CheckInput) {
			// a's second attempt starts 300 ms before the first one ends.
			in.History = append(in.History, life("a/v/0/2", "e3", 13, 300, 900, "end")...)
		}, PropOneAlive, "a/v/0/0@e1#10 and a/v/0/2@e3#13 were alive at once"},
		{"same execution run twice at once", func(in *CheckInput) {
			in.History = append(in.History, life("b/v/0/0", "e1", 99, 200, 800, "term")...)
		}, PropOneAlive, "b/v/0/0@e1#12 and b/v/0/0@e1#99"},
		{"a leader failover restarts a healthy job", func(in *CheckInput) {
			in.Faults = []FaultWindow{{Kind: "kill-leader", Target: "m1", Span: Span{ms(300), ms(400)}}}
			in.History = append(in.History[:len(in.History)-1], ev("term", "b/v/0/0", 900, "e1", 12))
			in.History = append(in.History, life("b/v/0/1", "e2", 30, 1000, 1600, "end")...)
			in.Final["b"].Restarts = 1
		}, PropNoSpurious, "with kill-leader m1 during its life: it restarted 1 times"},
		{"a healthy task stopped without a restart", func(in *CheckInput) {
			in.History = append(in.History[:len(in.History)-1], ev("term", "b/v/0/0", 900, "e1", 12))
		}, PropNoSpurious, "run b/v/0/0@e1#12 was stopped (SIGTERM)"},
		{"task process nobody expects", func(in *CheckInput) {
			in.Processes = []TaskProcess{{Pid: 4242, Execution: "a/v/0/0", Executor: "e1"}}
		}, PropNoStrayProcess, "pid 4242 runs execution a/v/0/0"},
		{"different hashes at one index", func(in *CheckInput) {
			in.Masters[1].Hash = "other"
		}, PropSameHash, "APART: master m2 at applied index 40 has hash other, while m1 has h and m3 has h"},
		{"masters never converged", func(in *CheckInput) {
			in.Masters[2].Applied, in.Masters[2].Hash = 39, "h39"
		}, PropSameHash, "BEHIND: master m3 is at applied index 39, below the target 40"},
		{"different job lists at one index", func(in *CheckInput) {
			in.Masters[1].Jobs = summaries("a", "FINISHED", "b", "RUNNING")
		}, PropSameHash, "APART: masters m1 and m2 list different jobs at the same applied index 40: b FINISHED vs RUNNING"},
		{"token goes backwards", func(in *CheckInput) {
			in.Tokens = append(in.Tokens, TokenSample{"e1", 0, 3, 7})
		}, PropTokens, "from fencing token 9 to 7"},
		{"race in a log", func(in *CheckInput) {
			in.LogProblems = []string{"e2: WARNING: DATA RACE"}
		}, PropCleanLogs, "DATA RACE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := healthy()
			tt.change(&in)
			res := Check(in)
			vs := res.Violations()
			if tt.prop == "" {
				require.Empty(t, vs)
				return
			}
			require.NotEmpty(t, vs, "the check must fail")
			for _, v := range vs {
				// A job missing on one master also makes the lists differ.
				if v.Property != alsoViolated[tt.name] {
					require.Equal(t, tt.prop, v.Property, "only %s is violated: %s", tt.prop, v.Detail)
				}
			}
			var details []string
			for _, v := range vs {
				details = append(details, v.Detail)
			}
			require.Contains(t, strings.Join(details, "\n"), tt.detail)
		})
	}
}

func TestCheckerAcceptsWhatTheDesignAllows(t *testing.T) {
	tests := []struct {
		name   string
		change func(in *CheckInput)
	}{
		{"cancelled job that finished before the cancel", func(in *CheckInput) {
			in.Jobs[1].CancelAcked = 2000
		}},
		{"cancelled job canceled", func(in *CheckInput) {
			in.Jobs[1].CancelAcked = 500
			in.Final["b"] = finalJob("b", "CANCELED", 600, 0)
		}},
		{"doomed job failed after a cancel (it was failing already)", func(in *CheckInput) {
			in.Jobs[1].Want = WantFailed
			in.Jobs[1].CancelAcked = 100
			in.Final["b"] = finalJob("b", "FAILED", 900, 0)
		}},
		{"overlap within the slack", func(in *CheckInput) {
			in.History = append(life("a/v/0/0", "e1", 10, 0, 600, "fail"), life("a/v/0/1", "e2", 11, 550, 1500, "end")...)
		}},
		{"a frozen run overlaps only while frozen", func(in *CheckInput) {
			// e1 froze at 200 and thawed at 3000; a/v/0/0 had records
			// before the freeze and (its thaw tail) just after it.
			in.History = []Event{ev("start", "a/v/0/0", 0, "e1", 10), ev("alive", "a/v/0/0", 150, "e1", 10),
				ev("alive", "a/v/0/0", 3010, "e1", 10), ev("term", "a/v/0/0", 3040, "e1", 10)}
			in.History = append(in.History, life("a/v/0/1", "e2", 11, 1500, 4000, "end")...)
			in.Frozen = []FrozenSpan{{Executor: "e1", Span: Span{ms(200), ms(3000)}, LeaseLost: true}}
		}},
		{"a run killed by a signal records fail then term", func(in *CheckInput) {
			in.History = append(in.History, ev("term", "a/v/0/0", 601, "e1", 10))
		}},
		{"a wiped executor starts again from token 0", func(in *CheckInput) {
			in.Tokens = append(in.Tokens, TokenSample{"e1", 1, 3, 0})
		}},
		{"a job restarted when an executor fault touched it", func(in *CheckInput) {
			in.Faults = []FaultWindow{{Kind: "kill-executor", Target: "e3", Span: Span{ms(300), ms(400)}, OnExecutor: true}}
			in.History = append(in.History[:len(in.History)-1], ev("term", "b/v/0/0", 900, "e1", 12))
			in.History = append(in.History, life("b/v/0/1", "e2", 30, 1000, 1600, "end")...)
			in.Final["b"].Restarts = 1
		}},
		{"an attempt past the budget for a restart the strategy did not count", func(in *CheckInput) {
			// b's third restart was for a lease that ran out for want of
			// a leader: one attempt more than the budget of 3.
			in.Final["b"] = finalJob("b", "FINISHED", 900, 4)
			in.Final["b"].UncountedRestarts = 1
			in.Jobs[1].NoFailures = false
			in.History = append(in.History, life("b/v/0/4", "e2", 20, 2000, 2300, "end")...)
		}},
		{"a process the leader expects", func(in *CheckInput) {
			in.Processes = []TaskProcess{{Pid: 1, Execution: "c/v/0/0", Executor: "e1"}}
			in.ExpectedLive = map[string]bool{"c/v/0/0": true}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := healthy()
			tt.change(&in)
			res := Check(in)
			require.Empty(t, res.Violations())
		})
	}
}

func TestCheckerThawTailIsMeasuredAndBounded(t *testing.T) {
	in := healthy()
	in.History = []Event{ev("start", "a/v/0/0", 0, "e1", 10), ev("alive", "a/v/0/0", 150, "e1", 10),
		ev("alive", "a/v/0/0", 3010, "e1", 10), ev("term", "a/v/0/0", 3040, "e1", 10)}
	in.History = append(in.History, life("a/v/0/1", "e2", 11, 1500, 4000, "end")...)
	in.Frozen = []FrozenSpan{{Executor: "e1", Span: Span{ms(200), ms(3000)}, LeaseLost: true}}
	res := Check(in)
	require.Empty(t, res.Violations())
	require.Equal(t, 40*time.Millisecond, time.Duration(res.MaxThawTail.Nanos))
	require.Zero(t, res.MaxOverlap.Nanos)

	// The same stale run still going 1.5 s after the thaw: the executor
	// did not fence itself.
	in.History = append(in.History, ev("alive", "a/v/0/0", 4500, "e1", 10), ev("alive", "a/v/0/1", 5000, "e2", 11))
	res = Check(in)
	require.Len(t, res.Violations(), 1)
	require.Equal(t, 500*time.Millisecond, time.Duration(res.MaxOverlap.Nanos), "the part past the allowance counts")
	require.Equal(t, PropOneAlive, res.Violations()[0].Property)

	// Without a lease expiry during the freeze there is no tail allowance.
	in = healthy()
	in.History = []Event{ev("start", "a/v/0/0", 0, "e1", 10), ev("alive", "a/v/0/0", 3300, "e1", 10)}
	in.History = append(in.History, life("a/v/0/1", "e2", 11, 1500, 4000, "end")...)
	in.Frozen = []FrozenSpan{{Executor: "e1", Span: Span{ms(200), ms(3000)}}}
	res = Check(in)
	require.Len(t, res.Violations(), 1)
	require.Equal(t, 300*time.Millisecond, time.Duration(res.MaxOverlap.Nanos))
}

func TestCheckerNotesRepeatedExecutions(t *testing.T) {
	in := healthy()
	in.Jobs[1].NoFailures = false
	in.History = append(in.History, life("b/v/0/0", "e1", 77, 2000, 2300, "end")...)
	res := Check(in)
	require.Empty(t, res.Violations())
	require.Len(t, res.Notes, 1)
	require.Contains(t, res.Notes[0], "b/v/0/0")
}

// TestReplicaVerdicts: the same-state-hash check names its case, BEHIND
// (the same prefix, slower) or APART (a different state at one applied
// index), from readings taken during the run and at the end.
func TestReplicaVerdicts(t *testing.T) {
	s := func(node string, applied uint64, hash string, at int64) HashSample {
		return HashSample{Node: node, Applied: applied, Hash: hash, At: at}
	}
	final := func(target uint64, ss ...HashSample) Convergence {
		return Convergence{Target: target, Final: ss, Reached: true, Waited: time.Second}
	}
	masters := []string{"m1", "m2", "m3"}
	tests := []struct {
		name    string
		samples []HashSample
		conv    Convergence
		want    map[string]ReplicaCase
		detail  string // a fragment of the first non-agreeing verdict's detail
	}{
		{"all agree", []HashSample{s("m1", 20, "a", 1), s("m2", 20, "a", 2)},
			final(40, s("m1", 40, "h", 9), s("m2", 40, "h", 9), s("m3", 40, "h", 9)),
			map[string]ReplicaCase{"m1": ReplicaAgrees, "m2": ReplicaAgrees, "m3": ReplicaAgrees}, ""},
		{"behind during the run, caught up at the end", []HashSample{s("m3", 20, "a", 1), s("m1", 20, "a", 2), s("m1", 30, "b", 3)},
			final(40, s("m1", 40, "h", 9), s("m2", 40, "h", 9), s("m3", 40, "h", 9)),
			map[string]ReplicaCase{"m1": ReplicaAgrees, "m2": ReplicaAgrees, "m3": ReplicaAgrees}, ""},
		{"behind at the end, same prefix", []HashSample{s("m3", 20, "a", 1), s("m1", 20, "a", 2)},
			final(40, s("m1", 40, "h", 9), s("m2", 40, "h", 9), s("m3", 35, "g", 9)),
			map[string]ReplicaCase{"m1": ReplicaAgrees, "m2": ReplicaAgrees, "m3": ReplicaBehind},
			"is at applied index 35, below the target 40"},
		{"apart at the end: the odd one is named", nil,
			final(40, s("m1", 40, "h", 9), s("m2", 40, "x", 9), s("m3", 40, "h", 9)),
			map[string]ReplicaCase{"m1": ReplicaAgrees, "m2": ReplicaApart, "m3": ReplicaAgrees},
			"at applied index 40 has hash x, while m1 has h and m3 has h"},
		{"apart during the run, behind at the end: apart wins", []HashSample{s("m1", 20, "a", 1), s("m2", 20, "z", 2), s("m3", 20, "a", 3)},
			final(40, s("m1", 40, "h", 9), s("m2", 33, "q", 9), s("m3", 40, "h", 9)),
			map[string]ReplicaCase{"m1": ReplicaAgrees, "m2": ReplicaApart, "m3": ReplicaAgrees},
			"at applied index 20 has hash z"},
		{"two readers disagree and nothing names the odd one: both apart", []HashSample{s("m1", 20, "a", 1), s("m2", 20, "z", 2)},
			final(40, s("m1", 40, "h", 9), s("m2", 40, "h", 9), s("m3", 40, "h", 9)),
			map[string]ReplicaCase{"m1": ReplicaApart, "m2": ReplicaApart, "m3": ReplicaAgrees},
			"at applied index 20 has hash a, while m2 has z"},
		{"a later majority names the odd one of a tie", []HashSample{s("m1", 20, "a", 1), s("m2", 20, "z", 2)},
			final(40, s("m1", 40, "h", 9), s("m2", 40, "y", 9), s("m3", 40, "h", 9)),
			map[string]ReplicaCase{"m1": ReplicaAgrees, "m2": ReplicaApart, "m3": ReplicaAgrees},
			"at applied index 20 has hash z, while m1 has a"},
		{"a master's own hash changes at one index", []HashSample{s("m1", 20, "a", 1), s("m1", 20, "b", 2)},
			final(40, s("m1", 40, "h", 9), s("m2", 40, "h", 9), s("m3", 40, "h", 9)),
			map[string]ReplicaCase{"m1": ReplicaApart, "m2": ReplicaAgrees, "m3": ReplicaAgrees},
			"its own hash at applied index 20 changed from a to b"},
		{"unread at the end", nil,
			final(40, s("m1", 40, "h", 9), s("m2", 40, "h", 9)),
			map[string]ReplicaCase{"m1": ReplicaAgrees, "m2": ReplicaAgrees, "m3": ReplicaUnread}, "could not be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := judgeReplicas(masters, tt.samples, tt.conv)
			got := map[string]ReplicaCase{}
			detail := ""
			for _, v := range vs {
				got[v.Node] = v.Case
				if v.Case != ReplicaAgrees && detail == "" {
					detail = v.Detail
				}
			}
			require.Equal(t, tt.want, got)
			require.Contains(t, detail, tt.detail)
		})
	}
}
