// Package wire is the protocol between masters and executors: the requests a
// leader sends to executors (deploy, cancel, heartbeat), the report an
// executor answers with or pushes, and the paths they travel on. Bodies are
// JSON, but for a deploy and its answer, which a leader sends in binary
// (binary.go) to an executor that takes it. Every request carries Version;
// a peer rejects a version it does not speak with 400 and an error naming
// both versions.
//
// Fencing: every leader request carries the leader's cluster id and fencing
// token. An executor answers a token older than the newest it has seen from
// that cluster, or a cluster it has seen replaced, with 409 and a
// StaleToken body, and acts on nothing in the request. A request from a new
// cluster (formed afresh, or restored from a snapshot) replaces the old one
// for good.
package wire

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Version is the protocol version. Bump it on any incompatible change;
// adding an optional field is compatible (peers ignore fields they do not
// know). Version 2 sends a deploy's tasks in groups (TaskGroup); version 3
// carries data between tasks: outputs and inputs of tasks, partitions in
// reports, release, and the executors' partition endpoints (partition.go).
const Version = 3

// The terminal message of a task its executor stopped because its lease
// ran out (no leader heartbeated it for its lease) begins with one of
// these; a leader takes such a CANCELED for no fault of the task's
// (LeaseExpiry), and its restart is not counted.
const (
	LeaseExpiredPrefix  = "lease expired: "
	LeaseExpiringPrefix = "lease expiring: "
)

// LeaseExpiry reports whether msg is the message of a task its executor's
// lease expiry stopped.
func LeaseExpiry(msg string) bool {
	return strings.HasPrefix(msg, LeaseExpiredPrefix) || strings.HasPrefix(msg, LeaseExpiringPrefix)
}

// Timing that both sides rely on.
const (
	// DefaultLease is an executor's self-fencing lease unless set (its
	// --lease), and the lease a master assumes unless told (its
	// --executor-lease): every task of an executor is dead this long after
	// the last heartbeat it got from a leader.
	DefaultLease = 10 * time.Second
	// MaxRequestTimeout bounds every request a leader sends an executor:
	// the leader gives up on an answer after at most this long, so a
	// request is in flight no longer than that. An executor that remembers
	// something "longer than any request can be in flight" derives the time
	// from this.
	MaxRequestTimeout = 10 * time.Second
)

// MaxSlots bounds the slots of one executor. An executor refuses to start
// with more; a leader takes an executor that claims more (in gossip or a
// report) to have this many, and logs the claim: a claim of 2e9 slots must
// not make it allocate 2e9 entries.
const MaxSlots = 1024

// Executor endpoints.
const (
	PathDeploy     = "/v1/internal/deploy"
	PathCancel     = "/v1/internal/cancel"
	PathHeartbeat  = "/v1/internal/heartbeat"
	PathExecutions = "/v1/executions"      // public: what the executor holds
	PathLogs       = "/v1/executions/logs" // public: ?id=<execution id>&stream=stdout|stderr
)

// HeaderExecutor names, on every request a leader sends to an executor,
// the executor it is meant for. An executor answers a request that names
// another with 421 Misdirected Request and acts on none of it: an address
// that gossip gives to another name (a member announced by a holder of the
// gossip key, or an executor restarted on a port another one had) must not
// make an executor run, cancel, release or forget another's work. A
// request that names none, from a leader of an older release, is taken.
const HeaderExecutor = "X-Jobmaster-Executor"

// Master endpoint that executors push state changes to (the leader's, or any
// master's, which forwards it).
const PathExecutorUpdate = "/v1/internal/executor-update"

// PathExecutorDrain is the master endpoint where an executor that was asked
// to stop (SIGTERM) asks for its own drain.
const PathExecutorDrain = "/v1/internal/executor-drain"

// DrainRequest is an executor's request for its own drain: its work may go
// on for DeadlineMs, then it is moved. Instance names the run of the
// executor that asks: the drain ends once another run answers the leader.
type DrainRequest struct {
	Version    int    `json:"version"`
	Executor   string `json:"executor"`
	Instance   string `json:"instance"`
	DeadlineMs int64  `json:"deadline_ms"`
}

// State is the state of an execution: the one vocabulary of the replicated
// state (package fsm), the executors' reports and the public API. An
// execution is SCHEDULED until it is placed, DEPLOYING from its placement
// until its task runs, RUNNING, CANCELING once asked to stop, and ends
// FINISHED (exit 0), FAILED or CANCELED. Executors report from DEPLOYING on.
type State string

// Execution states, in the order of an execution's life.
const (
	StateScheduled State = "SCHEDULED"
	StateDeploying State = "DEPLOYING"
	StateRunning   State = "RUNNING"
	StateCanceling State = "CANCELING"
	StateFinished  State = "FINISHED"
	StateCanceled  State = "CANCELED"
	StateFailed    State = "FAILED"
)

// Terminal reports whether the state is final.
func (s State) Terminal() bool {
	return s == StateFinished || s == StateCanceled || s == StateFailed
}

// Valid reports whether s is one of the execution states.
func (s State) Valid() bool {
	switch s {
	case StateScheduled, StateDeploying, StateRunning, StateCanceling, StateFinished, StateCanceled, StateFailed:
		return true
	}
	return false
}

// Leader identifies the leader that sent a request.
type Leader struct {
	Version int `json:"version"`
	// Cluster identifies the cluster (its replicated state); a new one
	// appears when a cluster is formed or restored from a snapshot. Tokens
	// compare only within one cluster.
	Cluster string `json:"cluster,omitempty"`
	Token   uint64 `json:"token"`
	// Node is the leader's node id and Addr its HTTP address, where the
	// executor pushes state changes.
	Node string `json:"node"`
	Addr string `json:"addr"`
}

// Task is one execution to run, as an executor handles it; on the wire,
// tasks travel in a DeployRequest's groups.
type Task struct {
	ExecutionID string            `json:"execution_id"`
	JobID       string            `json:"job_id"`
	Vertex      string            `json:"vertex"`
	Subtask     int               `json:"subtask"`
	Parallelism int               `json:"parallelism"`
	Attempt     int               `json:"attempt"`
	Slot        int               `json:"slot"`
	Command     []string          `json:"command"`
	Env         map[string]string `json:"env,omitempty"`
	// Outputs are the vertices that consume this task's output, Inputs
	// what it reads (partition.go).
	Outputs []Output `json:"outputs,omitempty"`
	Inputs  []Input  `json:"inputs,omitempty"`
	// Resources are what the task's vertex declared; an executor that
	// enforces them caps the task there.
	Resources Resources `json:"resources,omitzero"`
}

// Resources is what a task may use: CPU in thousandths of a core and
// memory in MiB; 0 sets no limit of that kind.
type Resources struct {
	CPUMillis int64 `json:"cpu_millis,omitempty"`
	MemoryMB  int64 `json:"memory_mb,omitempty"`
}

// DeployRequest asks an executor to run tasks. Deploying an execution the
// executor already holds (in any state) changes nothing and reports it.
//
// The tasks travel in groups: the tasks of one vertex of one job share
// their job, vertex, parallelism, command and environment, which are sent
// once per group instead of once per task (a deploy of 100 subtasks of one
// vertex is about a sixth of the bytes to encode and decode). Build one
// with NewDeployRequest and read it with Tasks.
type DeployRequest struct {
	Leader
	Groups []TaskGroup `json:"groups"`
}

// TaskGroup is tasks that share everything but their subtask, attempt and
// slot. Subtasks holds three numbers per task, subtask, attempt and slot,
// one task after another ([0,0,5, 1,0,6] is subtasks 0 and 1, attempt 0,
// in slots 5 and 6); the execution id is derived from them (ExecutionID).
type TaskGroup struct {
	JobID       string            `json:"job_id"`
	Vertex      string            `json:"vertex"`
	Parallelism int               `json:"parallelism"`
	Command     []string          `json:"command"`
	Env         map[string]string `json:"env,omitempty"`
	Outputs     []Output          `json:"outputs,omitempty"`
	Inputs      []Input           `json:"inputs,omitempty"`
	Resources   Resources         `json:"resources,omitzero"`
	Subtasks    []int             `json:"subtasks"`
}

// ExecutionID is the id of an execution: <job>/<vertex>/<subtask>/<attempt>.
func ExecutionID(job, vertex string, subtask, attempt int) string {
	return job + "/" + vertex + "/" + strconv.Itoa(subtask) + "/" + strconv.Itoa(attempt)
}

// NewDeployRequest groups tasks for a deploy: the tasks of one vertex of one
// job go in one group, in the order they come. Callers build tasks from
// their fields: the execution id is not sent but derived (ExecutionID).
func NewDeployRequest(l Leader, tasks []Task) DeployRequest {
	req := DeployRequest{Leader: l}
	type key struct{ job, vertex string }
	at := make(map[key]int)
	for _, t := range tasks {
		k := key{t.JobID, t.Vertex}
		i, ok := at[k]
		if !ok || !req.Groups[i].holds(t) {
			i = len(req.Groups)
			at[k] = i
			req.Groups = append(req.Groups, TaskGroup{JobID: t.JobID, Vertex: t.Vertex, Parallelism: t.Parallelism,
				Command: t.Command, Env: t.Env, Outputs: t.Outputs, Inputs: t.Inputs, Resources: t.Resources})
		}
		g := &req.Groups[i]
		g.Subtasks = append(g.Subtasks, t.Subtask, t.Attempt, t.Slot)
	}
	return req
}

func (g *TaskGroup) holds(t Task) bool {
	return g.JobID == t.JobID && g.Vertex == t.Vertex && g.Parallelism == t.Parallelism &&
		slices.Equal(g.Command, t.Command) && maps.Equal(g.Env, t.Env) &&
		slices.Equal(g.Outputs, t.Outputs) && slices.EqualFunc(g.Inputs, t.Inputs, Input.equal) && g.Resources == t.Resources
}

// Tasks expands the groups into tasks, group by group. The tasks of a group share
// its Command, Outputs and Inputs slices and Env map: read them, do not
// change them. A group
// whose Subtasks is not a whole number of triples is an error. Each triple
// becomes a task with an execution id of its own, built from its group's
// job and vertex ids: a reader of a deploy from the network bounds those
// ids and the number of triples before it calls Tasks (an executor does,
// in serveDeploy), or a small body can make gigabytes.
func (r *DeployRequest) Tasks() ([]Task, error) {
	n := 0
	for i := range r.Groups {
		g := &r.Groups[i]
		if len(g.Subtasks)%3 != 0 {
			return nil, fmt.Errorf("group %d (%s/%s): subtasks has %d numbers, not three per task", i, g.JobID, g.Vertex, len(g.Subtasks))
		}
		n += len(g.Subtasks) / 3
	}
	out := make([]Task, 0, n)
	for i := range r.Groups {
		g := &r.Groups[i]
		for k := 0; k < len(g.Subtasks); k += 3 {
			sub, att, slot := g.Subtasks[k], g.Subtasks[k+1], g.Subtasks[k+2]
			out = append(out, Task{ExecutionID: ExecutionID(g.JobID, g.Vertex, sub, att), JobID: g.JobID, Vertex: g.Vertex,
				Subtask: sub, Parallelism: g.Parallelism, Attempt: att, Slot: slot, Command: g.Command, Env: g.Env,
				Outputs: g.Outputs, Inputs: g.Inputs, Resources: g.Resources})
		}
	}
	return out, nil
}

// DeployResponse acknowledges a deployment: every task of the request appears
// in Executions with its state (FAILED with a message if it could not start).
type DeployResponse struct {
	Executions []ExecutionStatus `json:"executions"`
}

// CancelRequest asks an executor to stop executions: SIGTERM to the task's
// process group, then SIGKILL after the grace period. Unknown ids are
// ignored.
type CancelRequest struct {
	Leader
	IDs []string `json:"ids"`
}

// HeartbeatRequest renews the executor's lease. Ack lists terminal
// executions whose state the leader has recorded: the executor forgets them.
//
// Probe is set when the leader has not heard an answer from the executor
// for so long that renewing its lease blindly could keep it running past
// the moment the leader declares it lost (its answers may be getting lost
// while the requests arrive): the executor answers a probe, with its
// report, but does not renew its lease. Once an answer gets through, the
// leader renews again.
type HeartbeatRequest struct {
	Leader
	Ack   []string `json:"ack,omitempty"`
	Probe bool     `json:"probe,omitempty"`
}

// Report is an executor's account of what it holds: every live execution and
// every terminal one not yet acknowledged. It answers a heartbeat; a push
// (Partial) carries only what changed.
type Report struct {
	Version  int    `json:"version"`
	Executor string `json:"executor"`
	// Instance changes every time the executor process starts.
	Instance  string `json:"instance"`
	Token     uint64 `json:"token"` // newest fencing token seen
	Slots     int    `json:"slots"`
	UsedSlots int    `json:"used_slots"`
	// LeaseMs is the executor's self-fencing lease: the leader stops
	// renewing it in time for it to run out before the executor is lost.
	LeaseMs    int64             `json:"lease_ms,omitempty"`
	Partial    bool              `json:"partial,omitempty"`
	Executions []ExecutionStatus `json:"executions"`
	// Partitions is every partition the executor holds (in a full report;
	// a partial one may list some).
	Partitions []Partition `json:"partitions,omitempty"`
	// DiskFull: the executor's data directory has less than its reserve
	// free; the leader places nothing there until it clears.
	DiskFull bool `json:"disk_full,omitempty"`
	// StorageError is set while a write of the executor's own files (the
	// lease file, the fencing token) fails: the error of each (at most
	// MaxStorageError bytes).
	StorageError string `json:"storage_error,omitempty"`
	// CPUMillis and MemoryMB are what the executor offers for tasks'
	// resources (thousandths of a core, MiB); omitted by an executor that
	// predates them, which then takes no task that declares resources.
	CPUMillis int64 `json:"cpu_millis,omitempty"`
	MemoryMB  int64 `json:"memory_mb,omitempty"`
}

// MaxStorageError bounds a report's StorageError; a leader cuts a longer
// one.
const MaxStorageError = 512

// Bounds of a report as a leader reads it (a heartbeat's answer, a push).
// An executor holds far fewer executions (a job has at most 100,000
// subtasks) and partitions; a report past them is refused whole, before
// anything in it is acted on, so that one executor's answer cannot make a
// leader hold millions of entries.
const (
	MaxReportExecutions = 1 << 18
	MaxReportPartitions = 1 << 18
	// MaxUnavailable bounds the partitions one execution names as
	// unreadable: a consumer reads fewer sources than a job has subtasks
	// (at most 100,000); MaxReportUnavailable bounds them in a whole
	// report (each costs a string header however short).
	MaxUnavailable       = 1 << 17
	MaxReportUnavailable = 1 << 18
	// MaxJSONReportObjects bounds the objects of a report in JSON (from an
	// executor that predates binary reports), counted before it is
	// decoded: an empty status is 3 bytes of JSON and 150 of memory.
	MaxJSONReportObjects = 1 << 14
	// MaxStatusMessage bounds an execution's message as a leader records
	// it; a longer one is cut.
	MaxStatusMessage = 1 << 10
)

// CheckJSONReport refuses, before it is decoded, a report in JSON with
// more objects than MaxJSONReportObjects (an upper bound: braces in
// strings count too).
func CheckJSONReport(body []byte) error {
	if n := bytes.Count(body, []byte("{")); n > MaxJSONReportObjects {
		return fmt.Errorf("the report in JSON holds %d objects, at most %d are read (send it in binary)", n, MaxJSONReportObjects)
	}
	return nil
}

// CheckBounds refuses a report past the bounds above.
func (r *Report) CheckBounds() error {
	if n := len(r.Executions); n > MaxReportExecutions {
		return fmt.Errorf("the report lists %d executions, at most %d are read", n, MaxReportExecutions)
	}
	if n := len(r.Partitions); n > MaxReportPartitions {
		return fmt.Errorf("the report lists %d partitions, at most %d are read", n, MaxReportPartitions)
	}
	total := 0
	for i := range r.Executions {
		n := len(r.Executions[i].Unavailable)
		if n > MaxUnavailable {
			return fmt.Errorf("execution %.200q names %d unavailable partitions, at most %d are read", r.Executions[i].ExecutionID, n, MaxUnavailable)
		}
		if total += n; total > MaxReportUnavailable {
			return fmt.Errorf("the report names more than %d unavailable partitions in all", MaxReportUnavailable)
		}
	}
	return nil
}

// ExecutionStatus is one execution as an executor sees it.
type ExecutionStatus struct {
	ExecutionID string `json:"execution_id"`
	JobID       string `json:"job_id"`
	Vertex      string `json:"vertex"`
	Subtask     int    `json:"subtask"`
	Attempt     int    `json:"attempt"`
	Slot        int    `json:"slot"`
	State       State  `json:"state"`
	// Message explains a terminal state ("exit status 1", "lease expired").
	Message string `json:"message,omitempty"`
	// Bytes is, for a FINISHED task with outputs, the size of the
	// partition it left (the files that are consumer indexes).
	Bytes int64 `json:"bytes,omitempty"`
	// Unavailable lists, for a task that FAILED because it could not read
	// an input, the producer executions whose partitions it could not
	// fetch.
	Unavailable []string `json:"unavailable,omitempty"`
}

// UpdateResponse answers a push: the terminal executions now recorded.
type UpdateResponse struct {
	Ack []string `json:"ack,omitempty"`
}

// StaleToken is the 409 body of a request fenced off by a newer leader.
type StaleToken struct {
	Error string `json:"error"`
	Token uint64 `json:"token"`
}

// Executions is the body of GET /v1/executions.
type Executions struct {
	FencingToken uint64            `json:"fencing_token"`
	Executions   []ExecutionStatus `json:"executions"`
}

// Error is the body of every other error answer.
type Error struct {
	Error string `json:"error"`
}
