package fsm

import (
	"jobmaster/wire"
)

// Events are what applied entries changed, derived while they are applied:
// job status changes, execution state changes with their reason, restarts,
// executors lost, leaders established. They are not replicated and not in
// snapshots; every master derives the same events from the same entries,
// in the same order, because applying is deterministic. Each event is
// placed by its entry's log index and its offset among that entry's events
// (from 0), so that a reader can say exactly which events it has seen.

// Topic is what a reader subscribes to.
type Topic string

// Topics.
const (
	TopicJob       Topic = "job"
	TopicExecution Topic = "execution"
	TopicExecutor  Topic = "executor"
	TopicLeader    Topic = "leader"
)

// Topics lists every topic.
var Topics = []Topic{TopicJob, TopicExecution, TopicExecutor, TopicLeader}

// Event types.
const (
	// EventJobStatus: a job's status, message or restart count changed. One
	// event per job and command, with the status before the command
	// (Previous, "" for a new job) and after it.
	EventJobStatus = "job-status"
	// EventJobRestart: a failure that the job's restart strategy answered
	// with a restart. Reason is its kind (Reason* below), Message the cause.
	EventJobRestart = "job-restart"
	// EventJobForgotten: an ended job was forgotten (--job-retention).
	EventJobForgotten = "job-forgotten"
	// EventExecutionState: an execution's state changed, or a restart
	// created a new attempt (Previous ""); Message says why it ended.
	EventExecutionState = "execution-state"
	// EventExecutorStatus: the state recorded an executor's status: "lost"
	// (executor-lost), "draining" (drain-executor), "eligible"
	// (undrain-executor) and "moved" (move-executor). Readers must accept
	// statuses they do not know.
	EventExecutorStatus = "executor-status"
	// EventLeader: a leader established its epoch; Token is the new
	// fencing token.
	EventLeader = "leader-established"
)

// Restart reasons: the kind of failure a restart answers.
const (
	ReasonTaskFailed    = "task_failed"    // its executor reported it FAILED (a non-zero exit, or it could not start)
	ReasonTaskCanceled  = "task_canceled"  // it ended CANCELED without the leader asking (lease, executor shutdown)
	ReasonMissing       = "missing"        // a full report of its executor lacked it
	ReasonDeployExpired = "deploy_expired" // its deployment was not acknowledged in time
	ReasonExecutorLost  = "executor_lost"  // its executor stopped answering
	ReasonPartitionLost = "partition_lost" // a partition its consumers needed was lost
	// ReasonDrain is no failure: work moved off a draining executor at its
	// deadline, which the restart strategy does not count.
	ReasonDrain = "drain"
	// ReasonLeaseExpired is no failure of the task's either: its executor
	// cancelled it when no leader had heartbeated it for its lease (the
	// masters had no quorum, or the leader could not reach it), which the
	// restart strategy does not count.
	ReasonLeaseExpired = "lease_expired"
)

// Executor statuses an EventExecutorStatus carries.
const ExecutorLostStatus = "lost"

// Event is one change an applied entry made. Which fields are set depends
// on the type.
type Event struct {
	// Index is the log index of the entry, Offset the event's position
	// among the entry's events.
	Index  uint64
	Offset int
	Topic  Topic
	Type   string
	// Time is the command's time (unix ms, the leader's clock); 0 for
	// leader-established, which carries no time.
	Time int64

	Job string
	// Execution, Vertex, Subtask, Attempt and Executor name an execution
	// (execution-state) or an executor (executor-status).
	Execution string
	Vertex    string
	Subtask   int
	Attempt   int
	Executor  string
	// State and Previous are the execution state or job status after and
	// before the change; for executor-status, State is the status.
	State    string
	Previous string
	// Message is why: a terminal execution's message, a job's message, a
	// restart's cause.
	Message string
	// Reason is a restart's kind (Reason*).
	Reason string
	// Restarts is a job's region restarts so far (job-status).
	Restarts int
	// Node and Token are the new leader and its fencing token.
	Node  string
	Token uint64
}

// recorder collects the events of the entry being applied. A State
// without one records nothing.
type recorder struct {
	events []record
	// start is where the current command's events begin.
	start int
	// touched is the jobs the current command changed, with what they
	// were before it, in the order first touched.
	touched []jobMark
	// cause is the kind of failure the current command records, for the
	// restart it may cause.
	cause string
}

// record is an event as the state records it and the buffer keeps it.
// Execution-state events, thousands per entry when a wide region is placed
// or its deployments answered, are small: they point at the execution,
// whose identity (ID, Job, Vertex, Subtask, Attempt) never changes once it
// is made and whose Executor is set once, as it leaves SCHEDULED; they copy
// the rest. An event of SCHEDULED therefore names no executor, and no
// field a record reads is written after the record is made, so the events
// of a Result may be read outside the FSM's lock. Any other event is kept
// whole. A full record is 56 bytes with three pointers, where an Event is
// 232 with eleven; the buffer holds 65,536 of them on every master, and
// the collector scans them all at every cycle.
type record struct {
	exec  *Execution // execution-state
	other *Event     // any other event
	msg   string
	time  int64
	index uint64
	// offset is the event's position among its entry's events; an entry
	// is far smaller than 2^31 events.
	offset      int32
	state, prev uint8 // codes in execStates
}

// execStates are the execution states by their code in a record; 0 is ""
// (a new attempt's Previous).
var execStates = [...]wire.State{"", wire.StateScheduled, wire.StateDeploying, wire.StateRunning,
	wire.StateCanceling, wire.StateFinished, wire.StateCanceled, wire.StateFailed}

// stateCode is st's code in execStates; false for a state it does not
// hold.
func stateCode(st wire.State) (uint8, bool) {
	for i, s := range execStates {
		if s == st {
			return uint8(i), true
		}
	}
	return 0, false
}

// event is the event r records. Of the execution it reads only the
// identity and, unless the record is of SCHEDULED, the executor: fields
// that no later command writes. Reading its State or Message here would
// race with the applies that follow (Result.Events is read outside the
// lock). A record keeps its execution alive after its job is forgotten,
// and with it the array a snapshot restore allocated it in, until newer
// events push the record out of the buffer.
func (r *record) event() Event {
	if r.other != nil {
		ev := *r.other
		ev.Index, ev.Offset = r.index, int(r.offset)
		return ev
	}
	e := r.exec
	ev := Event{Index: r.index, Offset: int(r.offset), Topic: TopicExecution, Type: EventExecutionState, Time: r.time,
		Job: e.Job, Execution: e.ID, Vertex: e.Vertex, Subtask: e.Subtask, Attempt: e.Attempt,
		State: string(execStates[r.state]), Previous: string(execStates[r.prev]), Message: r.msg}
	if execStates[r.state] != wire.StateScheduled {
		ev.Executor = e.Executor
	}
	return ev
}

// topic and job are those of the event r records, read without making it.
func (r *record) topic() Topic {
	if r.other != nil {
		return r.other.Topic
	}
	return TopicExecution
}

func (r *record) job() string {
	if r.other != nil {
		return r.other.Job
	}
	return r.exec.Job
}

// events returns the events rs record.
func events(rs []record) []Event {
	if len(rs) == 0 {
		return nil
	}
	out := make([]Event, len(rs))
	for i := range rs {
		out[i] = rs[i].event()
	}
	return out
}

// jobMark is a job as it was before the command touched it.
type jobMark struct {
	job      *Job
	status   JobStatus
	message  string
	restarts int
	isNew    bool
}

// RecordEvents makes the state record the events of every entry it applies
// from now on (TakeEvents returns them).
func (s *State) RecordEvents() {
	if s.rec == nil {
		s.rec = &recorder{}
	}
}

// TakeEvents returns the events recorded since the last call, and forgets
// them.
func (s *State) TakeEvents() []Event { return events(s.takeRecords()) }

// takeRecords is TakeEvents, as records.
func (s *State) takeRecords() []record {
	if s.rec == nil || len(s.rec.events) == 0 {
		return nil
	}
	out := s.rec.events
	s.rec.events = nil
	s.rec.start = 0
	return out
}

// eventsHint is about how many events an entry's commands will record:
// one per execution a placement or a report names (the commands that
// change thousands at once), one for any other.
func eventsHint(cmds []Command) int {
	n := 0
	for _, c := range cmds {
		switch c := c.(type) {
		case *PlaceRegion:
			n += len(c.Slots)
		case *ReportExecutions:
			n += len(c.Updates)
		default:
			n++
		}
	}
	return n
}

// expectEvents makes room for n more events before an entry is applied:
// an entry whose commands change thousands of executions (a wide region
// placed, the reports of its deployments) then fills its events without
// copying them as they grow (append grows a large slice by a quarter at a
// time, and a record holds pointers, copied under the collector's write
// barrier).
func (s *State) expectEvents(n int) {
	if s.rec == nil {
		return
	}
	ev := s.rec.events
	if cap(ev)-len(ev) >= n {
		return
	}
	grown := make([]record, len(ev), max(2*cap(ev), len(ev)+n))
	copy(grown, ev)
	s.rec.events = grown
}

// beginCommand marks the start of a command's events.
func (s *State) beginCommand(cause string) {
	if s.rec != nil {
		s.rec.start = len(s.rec.events)
		s.rec.touched = s.rec.touched[:0]
		s.rec.cause = cause
	}
}

// endCommand records the job changes of the command that ends and returns
// its events, each placed at index.
func (s *State) endCommand(index uint64, now int64) []record {
	r := s.rec
	if r == nil {
		return nil
	}
	for _, m := range r.touched {
		j := m.job
		if !m.isNew && j.Status == m.status && j.Message == m.message && j.Restarts == m.restarts {
			continue
		}
		prev := string(m.status)
		if m.isNew {
			prev = ""
		}
		s.emit(Event{Topic: TopicJob, Type: EventJobStatus, Time: now, Job: j.ID, State: string(j.Status), Previous: prev,
			Message: j.Message, Restarts: j.Restarts})
	}
	r.touched = r.touched[:0]
	r.cause = ""
	out := r.events[r.start:]
	for i := range out {
		out[i].index = index
		out[i].offset = int32(r.start + i)
	}
	return out
}

// emit records an event of the current command.
func (s *State) emit(ev Event) {
	if s.rec != nil {
		s.rec.events = append(s.rec.events, record{other: &ev})
	}
}

// touchJob notes job j as it is before the current command changes its
// status, message or restarts; isNew marks a job the command created.
func (s *State) touchJob(j *Job, isNew bool) {
	r := s.rec
	if r == nil {
		return
	}
	for _, m := range r.touched {
		if m.job == j {
			return
		}
	}
	r.touched = append(r.touched, jobMark{job: j, status: j.Status, message: j.Message, restarts: j.Restarts, isNew: isNew})
}

// setJobStatus changes a job's status.
func (s *State) setJobStatus(j *Job, st JobStatus) {
	s.touchJob(j, false)
	j.Status = st
}

// setJobMessage changes a job's message.
func (s *State) setJobMessage(j *Job, msg string) {
	s.touchJob(j, false)
	j.Message = msg
}

// setExecState changes an execution's state and records it at now.
func (s *State) setExecState(e *Execution, st wire.State, now int64) {
	prev := e.State
	e.State = st
	if s.rec != nil && prev != st {
		s.emitExec(e, prev, now)
	}
}

// emitExec records an execution's change from prev (a new attempt: "").
func (s *State) emitExec(e *Execution, prev wire.State, now int64) {
	if s.rec == nil {
		return
	}
	msg := ""
	if e.State.Terminal() {
		msg = e.Message
	}
	st, ok1 := stateCode(e.State)
	pr, ok2 := stateCode(prev)
	if !ok1 || !ok2 || e.State == wire.StateScheduled && e.Executor != "" {
		// Not what a record can say: kept whole.
		s.emit(Event{Topic: TopicExecution, Type: EventExecutionState, Time: now, Job: e.Job, Execution: e.ID,
			Vertex: e.Vertex, Subtask: e.Subtask, Attempt: e.Attempt, Executor: e.Executor,
			State: string(e.State), Previous: string(prev), Message: msg})
		return
	}
	s.rec.events = append(s.rec.events, record{exec: e, msg: msg, time: now, state: st, prev: pr})
}

// failCause is the kind of failure the current command records.
func (s *State) failCause() string {
	if s.rec == nil || s.rec.cause == "" {
		return ReasonTaskFailed
	}
	return s.rec.cause
}

// setFailCause sets the kind of failure the current command records, for
// commands whose updates differ (a report of FAILED and CANCELED states).
func (s *State) setFailCause(cause string) {
	if s.rec != nil {
		s.rec.cause = cause
	}
}

// announceRestart records that job j restarts for cause, of the given
// kind: its message says so, and a job-restart event. Within one event
// (an executor lost: s.event) a job is announced once, for the first
// cause; what else of it restarts for the same event is part of that.
func (s *State) announceRestart(j *Job, kind, cause string, now int64) {
	if (kind == ReasonDrain || kind == ReasonLeaseExpired) && !s.uncounted[j.ID] {
		if s.uncounted == nil {
			s.uncounted = make(map[string]bool)
		}
		s.uncounted[j.ID] = true
		j.UncountedRestarts++
	}
	if d, ok := s.event[j.ID]; ok {
		if d.announced {
			return
		}
		d.announced = true
		s.event[j.ID] = d
	}
	s.setJobMessage(j, cause)
	s.emit(Event{Topic: TopicJob, Type: EventJobRestart, Time: now, Job: j.ID, Reason: kind, Message: cause, Restarts: j.Restarts})
}
