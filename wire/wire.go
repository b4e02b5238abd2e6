// Package wire is the protocol between masters and executors: the requests a
// leader sends to executors (deploy, cancel, heartbeat), the report an
// executor answers with or pushes, and the paths they travel on. Bodies are
// JSON. Every request carries Version; a peer rejects a version it does not
// speak with 400 and an error naming both versions.
//
// Fencing: every leader request carries the leader's cluster id and fencing
// token. An executor answers a token older than the newest it has seen from
// that cluster, or a cluster it has seen replaced, with 409 and a
// StaleToken body, and acts on nothing in the request. A request from a new
// cluster (formed afresh, or restored from a snapshot) replaces the old one
// for good.
package wire

// Version is the protocol version. Bump it on any incompatible change;
// adding an optional field is compatible (peers ignore fields they do not
// know).
const Version = 1

// Executor endpoints.
const (
	PathDeploy     = "/v1/internal/deploy"
	PathCancel     = "/v1/internal/cancel"
	PathHeartbeat  = "/v1/internal/heartbeat"
	PathExecutions = "/v1/executions"      // public: what the executor holds
	PathLogs       = "/v1/executions/logs" // public: ?id=<execution id>&stream=stdout|stderr
)

// Master endpoint that executors push state changes to (the leader's, or any
// master's, which forwards it).
const PathExecutorUpdate = "/v1/internal/executor-update"

// Execution states as executors report them (a subset of the master's).
const (
	StateDeploying = "DEPLOYING"
	StateRunning   = "RUNNING"
	StateCanceling = "CANCELING"
	StateFinished  = "FINISHED"
	StateCanceled  = "CANCELED"
	StateFailed    = "FAILED"
)

// TerminalState reports whether an execution state is final.
func TerminalState(s string) bool {
	return s == StateFinished || s == StateCanceled || s == StateFailed
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

// Task is one execution to run.
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
}

// DeployRequest asks an executor to run tasks. Deploying an execution the
// executor already holds (in any state) changes nothing and reports it.
type DeployRequest struct {
	Leader
	Tasks []Task `json:"tasks"`
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
}

// ExecutionStatus is one execution as an executor sees it.
type ExecutionStatus struct {
	ExecutionID string `json:"execution_id"`
	JobID       string `json:"job_id"`
	Vertex      string `json:"vertex"`
	Subtask     int    `json:"subtask"`
	Attempt     int    `json:"attempt"`
	Slot        int    `json:"slot"`
	State       string `json:"state"`
	// Message explains a terminal state ("exit status 1", "lease expired").
	Message string `json:"message,omitempty"`
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
