package integration

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The history half of the checker: task runs rebuilt from the records,
// the one-attempt-alive property, and restarts under master faults.

// run is one process of one execution, from its records.
type run struct {
	key       string // execution@executor#pid
	execution string
	subtask   string
	executor  string
	times     []int64
	kinds     []string
}

func (r *run) first() int64 { return r.times[0] }
func (r *run) last() int64  { return r.times[len(r.times)-1] }

func buildRuns(h []Event) []*run {
	byKey := map[string]*run{}
	var out []*run
	for _, e := range h {
		key := fmt.Sprintf("%s@%s#%d", e.Execution, e.Executor, e.Pid)
		r := byKey[key]
		if r == nil {
			r = &run{key: key, execution: e.Execution, subtask: e.Subtask(), executor: e.Executor}
			byKey[key] = r
			out = append(out, r)
		}
		r.times = append(r.times, e.At)
		r.kinds = append(r.kinds, e.Kind)
	}
	for _, r := range out {
		idx := make([]int, len(r.times))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return r.times[idx[a]] < r.times[idx[b]] })
		t, k := make([]int64, len(idx)), make([]string, len(idx))
		for i, j := range idx {
			t[i], k[i] = r.times[j], r.kinds[j]
		}
		r.times, r.kinds = t, k
	}
	sort.Slice(out, func(a, b int) bool { return out[a].key < out[b].key })
	return out
}

// faultMargin widens a job's life when looking for executor faults that
// may have touched it: an executor fault just after a task's last record
// can still lose its terminal state (the executor had not pushed it yet),
// and one healed just before the job's submission can still be resolving
// (reports of the executor's stale executions).
const faultMargin = 2 * time.Second

// checkSpuriousRestarts is design properties 6 and 7 under master faults.
// A job is clean if no task of it fails on purpose, nobody cancelled it,
// and no executor fault (kill, wipe, freeze, or an executor cut off from
// the masters) overlapped its life, from its submission to its last
// record, widened by faultMargin. Master faults (kills, pauses, cuts of
// masters, however many) may overlap it. A clean job must FINISH with no
// restart, each execution running once and ending by itself: a failover
// that restarts a healthy task, or loses a task's terminal state (so the
// task is failed as missing and restarted), breaks this.
func checkSpuriousRestarts(in CheckInput, runs []*run, props map[string]*PropertyResult, fail failFunc) {
	byJob := map[string][]*run{}
	for _, r := range runs {
		job := strings.SplitN(r.execution, "/", 2)[0]
		byJob[job] = append(byJob[job], r)
	}
	for _, j := range in.Jobs {
		f := in.Final[j.ID]
		rs := byJob[j.ID]
		if !j.Acked || !j.NoFailures || j.CancelAcked != 0 || f == nil || len(rs) == 0 || j.Submitted == 0 {
			continue
		}
		from, to := j.Submitted, rs[0].last()
		for _, r := range rs {
			to = max(to, r.last())
		}
		from, to = from-int64(faultMargin), to+int64(faultMargin)
		var masterFaults []string
		clean := true
		for _, fw := range in.Faults {
			if fw.Span.To < from || fw.Span.From > to {
				continue
			}
			if fw.OnExecutor {
				clean = false
				break
			}
			masterFaults = append(masterFaults, fw.Kind+" "+fw.Target)
		}
		if !clean {
			continue
		}
		props[PropNoSpurious].Checked++
		during := "no fault"
		if len(masterFaults) > 0 {
			during = strings.Join(masterFaults, ", ")
		}
		var problems []string
		if f.Status != "FINISHED" {
			problems = append(problems, "it is "+f.Status+": "+f.Message)
		}
		if f.Restarts > 0 {
			problems = append(problems, fmt.Sprintf("it restarted %d times (last reason: %s)", f.Restarts, f.Message))
		}
		starts := map[string]int{}
		for _, r := range rs {
			if r.execution[strings.LastIndexByte(r.execution, '/')+1:] != "0" {
				problems = append(problems, "attempt "+r.execution+" ran")
			}
			for _, k := range r.kinds {
				if k == "start" {
					starts[r.execution]++
				}
			}
			if last := r.kinds[len(r.kinds)-1]; last == "term" {
				problems = append(problems, fmt.Sprintf("run %s was stopped (SIGTERM)", r.key))
			}
		}
		for _, id := range sortedKeys(starts) {
			if starts[id] > 1 {
				problems = append(problems, fmt.Sprintf("execution %s started %d times", id, starts[id]))
			}
		}
		if len(problems) > 0 {
			fail(PropNoSpurious, "job %s (%s), with %s during its life: %s", j.ID, j.Kind, during, strings.Join(problems, "; "))
		}
	}
}

// liveSegments is a run's live set: from its first to its last record,
// minus the times its executor was frozen (the run's processes were
// stopped, so it made no progress).
func liveSegments(r *run, frozen []FrozenSpan) []Span {
	segs := []Span{{r.first(), r.last()}}
	for _, f := range frozen {
		if f.Executor != r.executor {
			continue
		}
		to := f.Span.To
		if to == 0 {
			to = 1<<63 - 1
		}
		var next []Span
		for _, s := range segs {
			if to <= s.From || f.Span.From >= s.To {
				next = append(next, s)
				continue
			}
			if s.From < f.Span.From {
				next = append(next, Span{s.From, f.Span.From})
			}
			if to < s.To {
				next = append(next, Span{to, s.To})
			}
		}
		segs = next
	}
	return segs
}

func intersect(a, b []Span) []Span {
	var out []Span
	for _, x := range a {
		for _, y := range b {
			from, to := max(x.From, y.From), min(x.To, y.To)
			if from < to {
				out = append(out, Span{from, to})
			}
		}
	}
	return out
}

// thawTails are the windows after a thaw of the executor, following a
// freeze longer than the lease, in which it may still be stopping its
// tasks.
func thawTails(executor string, frozen []FrozenSpan, allowance int64) []FrozenSpan {
	var out []FrozenSpan
	for _, f := range frozen {
		if f.Executor == executor && f.LeaseLost && f.Span.To != 0 {
			out = append(out, FrozenSpan{Executor: executor, Span: Span{f.Span.To, f.Span.To + allowance}})
		}
	}
	return out
}

// splitTail splits segments into the parts inside and outside the tails.
func splitTail(segs []Span, tails []FrozenSpan) (outside []Span, inside int64) {
	var total int64
	for _, s := range segs {
		total += s.To - s.From
	}
	cut := segs
	for _, tl := range tails {
		var next []Span
		for _, s := range cut {
			if tl.Span.To <= s.From || tl.Span.From >= s.To {
				next = append(next, s)
				continue
			}
			if s.From < tl.Span.From {
				next = append(next, Span{s.From, tl.Span.From})
			}
			if tl.Span.To < s.To {
				next = append(next, Span{tl.Span.To, s.To})
			}
		}
		cut = next
	}
	var left int64
	for _, s := range cut {
		left += s.To - s.From
	}
	return cut, total - left
}

// checkOverlaps is the one-attempt-alive property.
//
// Definition. A run is one process of one execution, identified by the
// execution id, executor and shell pid its records carry. Its live set is
// the interval from its first record to its last, minus every span in
// which the nemesis held its executor frozen together with all its
// descendants (a frozen run makes no progress; its records show nothing
// then). Two runs of the same subtask (job/vertex/index, any attempts,
// including two runs of one execution id) overlap where their live sets
// intersect. An overlap that lies within FenceAllowance after the thaw of
// an executor whose lease ran out while it was frozen is a "thaw tail": on
// SIGCONT the tasks and the executor resume together, and the executor
// can only stop them once its lease check runs, so the stale run may make
// a little progress; such tails are measured and reported, not counted.
// Any other overlap longer than Slack violates the property. The live set
// is an under-approximation (a process lives a little before its first
// record and, if killed, up to one tick after its last), hence the slack
// is kept small and the largest overlap is always reported.
func checkOverlaps(in CheckInput, runs []*run, props map[string]*PropertyResult, fail failFunc) (maxReal, maxTail Overlap) {
	bySub := map[string][]*run{}
	for _, r := range runs {
		bySub[r.subtask] = append(bySub[r.subtask], r)
	}
	allowance := int64(in.FenceAllowance)
	for _, sub := range sortedKeys(bySub) {
		l := bySub[sub]
		props[PropOneAlive].Checked++
		segs := make([][]Span, len(l))
		for i, r := range l {
			segs[i] = liveSegments(r, in.Frozen)
		}
		for i := 0; i < len(l); i++ {
			for k := i + 1; k < len(l); k++ {
				tails := append(thawTails(l[i].executor, in.Frozen, allowance), thawTails(l[k].executor, in.Frozen, allowance)...)
				inter := intersect(segs[i], segs[k])
				outside, tail := splitTail(inter, tails)
				var real, at int64
				for _, s := range outside {
					if real == 0 {
						at = s.From
					}
					real += s.To - s.From
				}
				a, b := l[i], l[k]
				if a.first() > b.first() {
					a, b = b, a
				}
				if tail > maxTail.Nanos {
					maxTail = Overlap{Subtask: sub, A: a.key, B: b.key, Nanos: tail, At: inter[0].From}
				}
				if real > maxReal.Nanos {
					maxReal = Overlap{Subtask: sub, A: a.key, B: b.key, Nanos: real, At: at}
				}
				if real > int64(in.Slack) {
					fail(PropOneAlive, "%s: %s and %s were alive at once for %s from %s (slack %s)",
						sub, a.key, b.key, time.Duration(real), time.Unix(0, at).UTC().Format("15:04:05.000"), in.Slack)
				}
			}
		}
	}
	return maxReal, maxTail
}
