package integration

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"jobmaster/api"
)

// The history checker of the chaos suite. It is pure: what the workload
// did, what the tasks wrote, what the nemesis froze and what the cluster
// looks like at the end go in (a CheckInput); the properties, each held or
// violated with its evidence, come out. It reads no clock and no file.

// Job outcomes the workload expects of a job that nobody cancels.
const (
	// WantFinished: no task fails on purpose more often than a generous
	// restart budget allows, so faults cannot exhaust it.
	WantFinished = "FINISHED"
	// WantFailed: a task always fails, so the budget runs out.
	WantFailed = "FAILED"
)

// JobRecord is what the workload knows of one job it submitted.
type JobRecord struct {
	ID   string
	Kind string // a label for the report: steady, flaky, doomed-none, ...
	// Want is the outcome without a cancel (WantFinished or WantFailed).
	Want string
	// MaxAttempt is the largest attempt number the restart strategy allows
	// (its restart budget; 0 for strategy none), or -1 if unbounded.
	MaxAttempt int
	// Acked: a submit of the job was answered 200 or 201.
	Acked bool
	// Conflicts counts 409 answers to retried submits of the same spec.
	Conflicts int
	// CancelAcked is when a cancel was answered 202 (unix ms, test clock;
	// 0 if the job was not cancelled).
	CancelAcked int64
	// Submitted is when the first submit was sent (unix ns).
	Submitted int64
	// NoFailures: no task of the job fails on purpose.
	NoFailures bool
}

// NotFound is a 404 answer, after the job was acknowledged, to a read or a
// cancel of it, from one master (the one the client asked, which answers
// itself if it believes it leads and forwards to the leader otherwise).
type NotFound struct {
	Job, Master string
	At          int64 // unix ns
}

// FaultWindow is when the nemesis held a fault (unix ns). OnExecutor
// marks the kinds that strike an executor (kill, wipe, freeze, cut off);
// the others strike masters only.
type FaultWindow struct {
	Kind       string
	Target     string
	Span       Span
	OnExecutor bool
}

// MasterSnapshot is one master's own view at the end (read with ?stale).
type MasterSnapshot struct {
	ID      string
	Jobs    []api.JobSummary
	Applied uint64
	Hash    string
	Err     string // set if the master could not be read
	At      int64  // when it was read (unix ns)
}

// Span is a time interval in unix nanoseconds.
type Span struct{ From, To int64 }

// FrozenSpan is a time when the nemesis held an executor and all its
// descendants stopped (SIGSTOP): its tasks made no progress then. LeaseLost
// says the freeze lasted longer than the executor's lease, so the
// executor must fence itself (stop its tasks) right after the thaw.
type FrozenSpan struct {
	Executor  string
	Span      Span
	LeaseLost bool
}

// TaskProcess is a live process carrying JOBMASTER_EXECUTION_ID.
type TaskProcess struct {
	Pid       int
	Execution string
	Executor  string
}

// TokenSample is an executor's fencing token as its /v1/executions showed
// it. Generation counts the wipes of its data directory: a wiped executor
// starts again from token 0.
type TokenSample struct {
	Executor   string
	Generation int
	At         int64
	Token      uint64
}

// CheckInput is everything the checker looks at.
type CheckInput struct {
	Jobs []JobRecord
	// Final is each job as the leader shows it at the end (missing: could
	// not be read).
	Final        map[string]*api.Job
	Masters      []MasterSnapshot
	History      []Event
	Frozen       []FrozenSpan
	Faults       []FaultWindow
	Processes    []TaskProcess
	ExpectedLive map[string]bool
	Tokens       []TokenSample
	NotFounds    []NotFound
	LogProblems  []string
	// HashSamples are readings of the masters' state hashes during the
	// run, and Convergence the end of the run's wait for equal applied
	// indexes (see checker_replicas.go).
	HashSamples []HashSample
	Convergence Convergence
	// KnownLogIssues are log reports of bugs already reported (see
	// knownIssues): noted, not violations.
	KnownLogIssues []string
	// Slack forgives overlaps up to this long (recording skew: a record is
	// written a moment after the moment it describes). FenceAllowance is
	// how long after a thaw an executor whose lease ran out while frozen
	// may take to stop its tasks.
	Slack          time.Duration
	FenceAllowance time.Duration
}

// Violation is one breach of a property.
type Violation struct {
	Property string
	Detail   string
}

// PropertyResult is one property with its verdict.
type PropertyResult struct {
	Name        string
	Description string
	Checked     int // how many things were checked
	Violations  []Violation
}

// Held reports whether no violation was found.
func (p PropertyResult) Held() bool { return len(p.Violations) == 0 }

// Overlap is two runs of one subtask alive at once.
type Overlap struct {
	Subtask string
	A, B    string // "<execution id>@<executor>#<pid>"
	Nanos   int64
	At      int64 // start of the overlap
}

func (o Overlap) String() string {
	if o.Subtask == "" {
		return "none"
	}
	return fmt.Sprintf("%s (%s and %s, %s from %s)", time.Duration(o.Nanos), o.A, o.B, o.Subtask,
		time.Unix(0, o.At).UTC().Format("15:04:05.000"))
}

// CheckResult is the checker's verdict.
type CheckResult struct {
	Properties []PropertyResult
	// MaxOverlap is the largest overlap of two runs of a subtask outside
	// post-thaw fencing tails; MaxThawTail the largest inside one.
	MaxOverlap  Overlap
	MaxThawTail Overlap
	// Replicas is each master's case (AGREES, BEHIND, APART, UNREAD).
	Replicas []ReplicaVerdict
	// Notes are observations that break no property (for the report).
	Notes []string
}

// Violations lists every violation of every property.
func (r *CheckResult) Violations() []Violation {
	var out []Violation
	for _, p := range r.Properties {
		out = append(out, p.Violations...)
	}
	return out
}

// Property names.
const (
	PropAckedDurable   = "acked-jobs-on-every-master"
	PropExistsOnce     = "job-exists-once"
	PropTerminal       = "every-job-terminal"
	PropOutcome        = "outcome-fits-spec"
	PropRestartBudget  = "restart-budget-kept"
	PropOneAlive       = "one-attempt-alive"
	PropNoSpurious     = "master-faults-restart-nothing"
	PropNoStrayProcess = "no-unexpected-task-process"
	PropSameHash       = "same-state-hash"
	PropTokens         = "executor-token-monotonic"
	PropCleanLogs      = "no-race-panic-fatal"
)

var propertyDescriptions = map[string]string{
	PropAckedDurable:   "every acknowledged job is on every master at the end (stale reads at equal applied indexes), and no read or cancel after its acknowledgment answered 404",
	PropExistsOnce:     "a job id appears once per master, only ids the workload submitted, never a 409 for a retried identical submit",
	PropTerminal:       "after the faults stop every job reaches FINISHED, FAILED or CANCELED",
	PropOutcome:        "the terminal state fits the tasks, the restart strategy and the cancels",
	PropRestartBudget:  "no subtask has more attempts than its restart strategy allows",
	PropOneAlive:       "no two runs of a subtask alive at once (history; frozen time excluded; slack for skew)",
	PropNoSpurious:     "a job with no failing task that no executor fault touched runs each subtask once and FINISHES: master faults (kill, pause, cut) restart nothing and lose no terminal state",
	PropNoStrayProcess: "no task process alive that the leader does not expect",
	PropSameHash:       "every master reaches the leader's applied index, and wherever two masters were read at the same applied index (during the run and at the end) their state hashes are equal; a failure says BEHIND (same log prefix, slower) or APART (a different state at the same index)",
	PropTokens:         "an executor's fencing token never goes backwards (per data directory)",
	PropCleanLogs:      "no master or executor log has a data race, a panic or a fatal error",
}

// PropertyNames lists the properties in report order.
func PropertyNames() []string {
	return []string{PropAckedDurable, PropExistsOnce, PropTerminal, PropOutcome, PropRestartBudget,
		PropOneAlive, PropNoSpurious, PropNoStrayProcess, PropSameHash, PropTokens, PropCleanLogs}
}

// Check runs every check.
func Check(in CheckInput) CheckResult {
	var res CheckResult
	props := map[string]*PropertyResult{}
	for _, n := range PropertyNames() {
		props[n] = &PropertyResult{Name: n, Description: propertyDescriptions[n]}
	}
	fail := func(prop, format string, args ...any) {
		props[prop].Violations = append(props[prop].Violations, Violation{Property: prop, Detail: fmt.Sprintf(format, args...)})
	}
	res.Replicas = checkReplicas(in, props, fail)
	checkJobs(in, res.Replicas, props, fail)
	res.Notes = append(res.Notes, checkNotFounds(in, props, fail)...)
	runs := buildRuns(in.History)
	checkSpuriousRestarts(in, runs, props, fail)
	res.MaxOverlap, res.MaxThawTail = checkOverlaps(in, runs, props, fail)
	checkProcesses(in, props, fail)
	checkTokens(in, props, fail)
	props[PropCleanLogs].Checked = 1
	for _, l := range in.LogProblems {
		fail(PropCleanLogs, "%s", l)
	}
	res.Notes = append(res.Notes, notes(in, runs)...)
	for _, n := range PropertyNames() {
		res.Properties = append(res.Properties, *props[n])
	}
	return res
}

type failFunc func(prop, format string, args ...any)

func terminalStatus(s string) bool {
	return s == "FINISHED" || s == "FAILED" || s == "CANCELED"
}

// checkJobs: durability, uniqueness, termination, outcome, restart budget.
func checkJobs(in CheckInput, replicas []ReplicaVerdict, props map[string]*PropertyResult, fail failFunc) {
	submitted := map[string]bool{}
	for _, j := range in.Jobs {
		submitted[j.ID] = true
		if j.Conflicts > 0 {
			fail(PropExistsOnce, "job %s: %d retried submits of the same spec were answered 409 conflict", j.ID, j.Conflicts)
		}
	}
	for _, m := range in.Masters {
		if m.Err != "" {
			continue
		}
		seen := map[string]int{}
		for _, s := range m.Jobs {
			seen[s.ID]++
		}
		props[PropExistsOnce].Checked += len(m.Jobs)
		for _, id := range sortedKeys(seen) {
			if seen[id] > 1 {
				fail(PropExistsOnce, "master %s lists job %s %d times", m.ID, id, seen[id])
			}
			if !submitted[id] {
				fail(PropExistsOnce, "master %s lists job %s, which the workload never submitted", m.ID, id)
			}
		}
		for _, j := range in.Jobs {
			if !j.Acked {
				continue
			}
			props[PropAckedDurable].Checked++
			if seen[j.ID] == 0 {
				fail(PropAckedDurable, "acknowledged job %s is missing on master %s: %s", j.ID, m.ID, missingVerdict(m, j.ID, in.Masters, replicas))
			}
		}
	}
	for _, j := range in.Jobs {
		if !j.Acked {
			continue
		}
		f := in.Final[j.ID]
		props[PropTerminal].Checked++
		if f == nil {
			fail(PropTerminal, "job %s: its final state could not be read from the leader", j.ID)
			continue
		}
		if !terminalStatus(f.Status) {
			fail(PropTerminal, "job %s is still %s after the cluster healed (%s)", j.ID, f.Status, subtaskStates(f))
			continue
		}
		props[PropOutcome].Checked++
		checkOutcome(j, f, fail)
		if j.MaxAttempt >= 0 {
			props[PropRestartBudget].Checked++
			for _, v := range f.Vertices {
				for _, s := range v.Subtasks {
					if max := maxAttempt(j, f); s.Attempt > max {
						fail(PropRestartBudget, "job %s (%s): subtask %s/%d reached attempt %d, the strategy allows %s",
							j.ID, j.Kind, v.ID, s.Index, s.Attempt, budgetText(j, f))
					}
				}
			}
		}
	}
	// The history shows attempts the final view no longer does.
	budget := map[string]JobRecord{}
	for _, j := range in.Jobs {
		budget[j.ID] = j
	}
	over := map[string]bool{}
	for _, e := range in.History {
		job := strings.SplitN(e.Execution, "/", 2)[0]
		j, ok := budget[job]
		if !ok || j.MaxAttempt < 0 || e.Attempt() <= maxAttempt(j, in.Final[job]) || over[e.Execution] {
			continue
		}
		over[e.Execution] = true
		fail(PropRestartBudget, "job %s (%s): execution %s ran, the strategy allows %s", j.ID, j.Kind, e.Execution, budgetText(j, in.Final[job]))
	}
}

// maxAttempt is the largest attempt a subtask of j may reach: the
// strategy's budget, and one more for each restart the strategy does not
// count (a lease that ran out for want of a leader, a drain), as the job's
// final state (f, nil if unread) says.
func maxAttempt(j JobRecord, f *api.Job) int {
	if f == nil {
		return j.MaxAttempt
	}
	return j.MaxAttempt + f.UncountedRestarts
}

// budgetText says what maxAttempt allows.
func budgetText(j JobRecord, f *api.Job) string {
	if f == nil || f.UncountedRestarts == 0 {
		return fmt.Sprintf("%d restarts", j.MaxAttempt)
	}
	return fmt.Sprintf("%d restarts and %d it does not count", j.MaxAttempt, f.UncountedRestarts)
}

// checkNotFounds: no read or cancel after the acknowledgment may say the
// job does not exist (a deposed leader once did, from its stale state).
func checkNotFounds(in CheckInput, props map[string]*PropertyResult, fail failFunc) (notes []string) {
	for _, nf := range in.NotFounds {
		at := time.Unix(0, nf.At).UTC().Format("15:04:05.000")
		fail(PropAckedDurable, "master %s answered 404 (not found) for acknowledged job %s at %s", nf.Master, nf.Job, at)
	}
	return nil
}

// cancelSlackMs forgives the leader's end time being a little after the
// client saw its cancel acknowledged (both read the same machine clock).
const cancelSlackMs = 100

func checkOutcome(j JobRecord, f *api.Job, fail failFunc) {
	cancelled := j.CancelAcked != 0
	switch {
	case f.Status == "CANCELED" && !cancelled:
		fail(PropOutcome, "job %s (%s) is CANCELED but nobody cancelled it", j.ID, j.Kind)
	case f.Status == "CANCELED":
	case f.Status != j.Want:
		fail(PropOutcome, "job %s (%s) is %s, expected %s: %s", j.ID, j.Kind, f.Status, j.Want, f.Message)
	case cancelled && f.Status == "FINISHED" && f.EndTime > j.CancelAcked+cancelSlackMs:
		// A FAILED job may have been FAILING already, which a cancel does
		// not change; a running one must become CANCELED.
		fail(PropOutcome, "job %s (%s) is FINISHED at %d ms though its cancel was acknowledged at %d ms",
			j.ID, j.Kind, f.EndTime, j.CancelAcked)
	}
}

func subtaskStates(f *api.Job) string {
	var parts []string
	for _, v := range f.Vertices {
		for _, s := range v.Subtasks {
			parts = append(parts, fmt.Sprintf("%s/%d#%d %s on %s", v.ID, s.Index, s.Attempt, s.State, s.Executor))
		}
	}
	if f.Message != "" {
		parts = append(parts, "message: "+f.Message)
	}
	return strings.Join(parts, ", ")
}

func jobListDiff(a, b []api.JobSummary) string {
	am := map[string]string{}
	for _, j := range a {
		am[j.ID] = j.Status
	}
	bm := map[string]string{}
	for _, j := range b {
		bm[j.ID] = j.Status
	}
	var out []string
	for _, id := range sortedKeys(am) {
		if bs, ok := bm[id]; !ok {
			out = append(out, id+" only in the first")
		} else if bs != am[id] {
			out = append(out, fmt.Sprintf("%s %s vs %s", id, am[id], bs))
		}
	}
	for _, id := range sortedKeys(bm) {
		if _, ok := am[id]; !ok {
			out = append(out, id+" only in the second")
		}
	}
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}

func checkProcesses(in CheckInput, props map[string]*PropertyResult, fail failFunc) {
	props[PropNoStrayProcess].Checked += len(in.Processes) + len(in.ExpectedLive)
	for _, p := range in.Processes {
		if !in.ExpectedLive[p.Execution] {
			fail(PropNoStrayProcess, "pid %d runs execution %s on %s, which the leader does not expect live", p.Pid, p.Execution, p.Executor)
		}
	}
}

func checkTokens(in CheckInput, props map[string]*PropertyResult, fail failFunc) {
	type key struct {
		ex  string
		gen int
	}
	last := map[key]TokenSample{}
	samples := append([]TokenSample(nil), in.Tokens...)
	sort.SliceStable(samples, func(a, b int) bool { return samples[a].At < samples[b].At })
	reported := map[key]bool{}
	for _, s := range samples {
		props[PropTokens].Checked++
		k := key{s.Executor, s.Generation}
		if prev, ok := last[k]; ok && s.Token < prev.Token && !reported[k] {
			reported[k] = true
			fail(PropTokens, "executor %s went from fencing token %d to %d without a wipe of its data directory", s.Executor, prev.Token, s.Token)
		}
		if prev, ok := last[k]; !ok || s.Token >= prev.Token {
			last[k] = s
		}
	}
}

// notes: executions that ran more than once (a redeployment of the same
// attempt after its executor lost it) and runs the nemesis thawed.
func notes(in CheckInput, runs []*run) []string {
	byExec := map[string]int{}
	for _, r := range runs {
		for _, k := range r.kinds {
			if k == "start" {
				byExec[r.execution]++
				break
			}
		}
	}
	twice := 0
	var ex []string
	for _, id := range sortedKeys(byExec) {
		if byExec[id] > 1 {
			twice++
			if len(ex) < 3 {
				ex = append(ex, id)
			}
		}
	}
	var out []string
	// "<issue> on <node>: <summary>": one note per issue with its nodes.
	nodes, summary := map[string][]string{}, map[string]string{}
	for _, k := range in.KnownLogIssues {
		id, rest, _ := strings.Cut(k, " on ")
		node, sum, _ := strings.Cut(rest, ": ")
		if !slices.Contains(nodes[id], node) {
			nodes[id] = append(nodes[id], node)
		}
		summary[id] = sum
	}
	for _, id := range sortedKeys(nodes) {
		out = append(out, fmt.Sprintf("KNOWN BUG %s still present in the logs of %s (reported, not counted as a violation): %s",
			id, strings.Join(nodes[id], ", "), summary[id]))
	}
	if twice > 0 {
		out = append(out, fmt.Sprintf("%d execution ids were started more than once (the same attempt deployed again, e.g. %s)", twice, strings.Join(ex, ", ")))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
