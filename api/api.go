// Package api holds the JSON bodies of the masters' public HTTP API
// (docs/api.md), shared by the server and the client.
package api

import (
	"jobmaster/wire"
)

// DefaultAddress is where the client looks for masters when neither
// --address nor JOBMASTER_ADDR is set: the masters of `jobmaster dev`.
const DefaultAddress = "127.0.0.1:7401,127.0.0.1:7402,127.0.0.1:7403"

// MaxBodyBytes bounds a request body, on masters and executors alike; a
// larger one gets 413 (package transport enforces it).
const MaxBodyBytes = 1 << 20

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
}

// SubmitResponse answers PUT /v1/jobs/{id} and POST /v1/jobs.
type SubmitResponse struct {
	ID string `json:"id"`
}

// CancelResponse answers POST /v1/jobs/{id}/cancel: the job's status once
// the cancel was committed. CANCELLING (or CANCELED, for a job with nothing
// running) when it took effect; a job that was already ending or had ended
// keeps its status (FAILING, FINISHED, ...), and the cancel changed nothing.
type CancelResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Unchanged: the job was already ending or had ended.
	Unchanged bool `json:"unchanged,omitempty"`
}

// JobList answers GET /v1/jobs.
type JobList struct {
	Jobs []JobSummary `json:"jobs"`
}

// JobSummary is one job of the list.
type JobSummary struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"`
	// SubmitTime is when the job was submitted and EndTime when it ended
	// (omitted until then), in unix milliseconds of the leader's clock.
	SubmitTime int64 `json:"submit_time_ms"`
	EndTime    int64 `json:"end_time_ms,omitempty"`
}

// Job answers GET /v1/jobs/{id}.
type Job struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	Restarts int    `json:"restarts"`
	// UncountedRestarts: of those, the ones the restart strategy did not
	// count (a drain's move, a lease that ran out for want of a leader).
	UncountedRestarts int `json:"uncounted_restarts,omitempty"`
	// Message says why the job failed or what it last restarted for.
	Message    string `json:"message,omitempty"`
	SubmitTime int64  `json:"submit_time_ms"`
	EndTime    int64  `json:"end_time_ms,omitempty"`
	// StartSlots is, for a job that has not ended, the fewest free slots
	// that let it start (its smallest first region's need), and
	// DeclaresResources whether a vertex declares CPU or memory: what a
	// client needs to say why the job waits to be placed.
	StartSlots        int  `json:"start_slots,omitempty"`
	DeclaresResources bool `json:"declares_resources,omitempty"`
	// WaitingSlots is the most new slots a region ready to run (its
	// upstream regions finished) and not placed yet needs at once: what
	// a client says of a job whose later region waits for slots.
	WaitingSlots int `json:"waiting_slots,omitempty"`
	// WaitingForDrain names a draining executor where a region ready to
	// run would join a slot the job's tasks hold: it waits until they end
	// there, at the drain's deadline at the latest.
	WaitingForDrain string `json:"waiting_for_drain,omitempty"`
	// WaitingForDrainDeadline is that drain's deadline (unix ms, the
	// leader's clock).
	WaitingForDrainDeadline int64    `json:"waiting_for_drain_deadline_ms,omitempty"`
	Vertices                []Vertex `json:"vertices"`
}

// Vertex is one vertex of a job.
type Vertex struct {
	ID          string `json:"id"`
	Parallelism int    `json:"parallelism"`
	// Inputs are the vertex's incoming edges, as its spec has them with
	// the defaults filled in (omitted for a source).
	Inputs   []Input   `json:"inputs,omitempty"`
	Subtasks []Subtask `json:"subtasks"`
}

// Input is an edge into a vertex: its producer, mode and distribution.
type Input struct {
	From         string `json:"from"`
	Mode         string `json:"mode"`
	Distribution string `json:"distribution"`
}

// Subtask is the current attempt of one subtask.
type Subtask struct {
	Index       int        `json:"index"`
	Attempt     int        `json:"attempt"`
	State       wire.State `json:"state"`
	Executor    string     `json:"executor"`
	ExecutionID string     `json:"execution_id"`
	// StartTime is when the leader recorded it RUNNING and EndTime when it
	// ended (unix ms, the leader's clock); each is omitted until then.
	StartTime int64  `json:"start_time_ms,omitempty"`
	EndTime   int64  `json:"end_time_ms,omitempty"`
	Message   string `json:"message,omitempty"`
	// PreviousAttempt is how the attempt before this one ended, for a
	// subtask that restarted: why it failed, or that it was stopped (or had
	// finished) and ran again with its region. Omitted at the first attempt.
	PreviousAttempt *PreviousAttempt `json:"previous_attempt,omitempty"`
}

// PreviousAttempt is how a replaced attempt of a subtask ended.
type PreviousAttempt struct {
	Attempt int        `json:"attempt"`
	State   wire.State `json:"state"`
	Message string     `json:"message,omitempty"`
	EndTime int64      `json:"end_time_ms,omitempty"`
	// Executor is where it ran ("" if it was replaced before it was placed,
	// or recorded by a master of an earlier release).
	Executor string `json:"executor,omitempty"`
}

// Cluster answers GET /v1/cluster.
type Cluster struct {
	Leader       *string `json:"leader"`
	FencingToken uint64  `json:"fencing_token"`
	// ClusterID names the cluster's replicated state; it changes when the
	// state is restored from a snapshot.
	ClusterID string     `json:"cluster_id,omitempty"`
	Masters   []Master   `json:"masters"`
	Executors []Executor `json:"executors"`
}

// Master is one master of the Raft configuration. Role is leader, follower
// or candidate; Status is what gossip says of it: alive, dead (failed or
// unreachable) or left.
type Master struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	Role     string `json:"role"`
	Status   string `json:"status,omitempty"`
}

// ExecutorDrained is the status of a draining executor that holds nothing
// a job still needs.
const ExecutorDrained = "drained"

// Executor is one executor. Status is alive, suspect or lost, or drained
// for a draining executor that holds nothing a job still needs (and is not
// lost). An executor under an operator's drain that stopped and was
// forgotten is listed with no address and no slots, drained (or lost when
// the state still has work on it), until the drain is disabled.
type Executor struct {
	ID        string `json:"id"`
	HTTPAddr  string `json:"http_addr"`
	Slots     int    `json:"slots"`
	FreeSlots int    `json:"free_slots"`
	Status    string `json:"status"`
	// Draining: the executor takes no new work (POST
	// /v1/executors/{id}/drain).
	Draining bool `json:"draining"`
	// DrainDeadline is when a draining executor's remaining work is moved
	// (unix ms, the leader's clock); omitted when not draining.
	DrainDeadline int64 `json:"drain_deadline_ms,omitempty"`
	// SilentMs is how long the executor has not answered the leader's
	// heartbeats, in milliseconds (the leader's view; omitted from a stale
	// read's gossip view).
	SilentMs *int64 `json:"silent_ms,omitempty"`
	// Partitions is how many result partitions the replicated state
	// records on the executor.
	Partitions int `json:"partitions"`
	// DiskFull: the executor's data directory is full; nothing new is
	// placed there.
	DiskFull bool `json:"disk_full"`
	// StorageError is set while the executor fails to write its lease file
	// or fencing token: what failed.
	StorageError string `json:"storage_error,omitempty"`
	// CPUMillis and MemoryMB are what it offers for tasks' resources, and
	// FreeCPUMillis and FreeMemoryMB what its live executions leave of it
	// (omitted until it reports them, and with ?stale).
	CPUMillis     int64  `json:"cpu_millis,omitempty"`
	MemoryMB      int64  `json:"memory_mb,omitempty"`
	FreeCPUMillis *int64 `json:"free_cpu_millis,omitempty"`
	FreeMemoryMB  *int64 `json:"free_memory_mb,omitempty"`
}

// DrainRequest is the body of POST /v1/executors/{id}/drain: how long the
// executor's running work may go on before it is moved ("30s"; default
// DefaultDrainDeadline).
type DrainRequest struct {
	Deadline string `json:"deadline,omitempty"`
}

// DefaultDrainDeadline is a drain's deadline when the request names none.
const DefaultDrainDeadline = "1h"

// DrainResponse answers POST and DELETE /v1/executors/{id}/drain.
type DrainResponse struct {
	Executor string `json:"executor"`
	Draining bool   `json:"draining"`
	// Deadline is when what still runs there is moved (unix ms, the
	// leader's clock); omitted once undrained.
	Deadline int64 `json:"deadline_ms,omitempty"`
}

// Health answers GET /v1/health.
type Health struct {
	Leader *string `json:"leader"`
	Node   string  `json:"node"`
}

// StateHash answers GET /v1/state/hash: the digest of this master's
// replicated state at its applied index (for comparing replicas).
type StateHash struct {
	Node         string `json:"node"`
	AppliedIndex uint64 `json:"applied_index"`
	Hash         string `json:"hash"`
}

// SnapshotRestored answers PUT /v1/operator/snapshot: what the restored
// state holds.
type SnapshotRestored struct {
	Restored   bool `json:"restored"`
	Jobs       int  `json:"jobs"`
	Executions int  `json:"executions"`
	// ACLReset: the masters enforce ACLs and the restored state was never
	// bootstrapped (?reset_acl): anyone may bootstrap the ACLs now.
	ACLReset bool `json:"acl_reset,omitempty"`
}

// RaftPeers answers GET /v1/operator/raft/peers.
type RaftPeers struct {
	Peers []RaftPeer `json:"peers"`
}

// RaftPeer is one server of the Raft configuration.
type RaftPeer struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
	Leader  bool   `json:"leader"`
}
