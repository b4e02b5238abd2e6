package api

// Event is one line of GET /v1/events (docs/api.md, "GET /v1/events"): a
// change an applied Raft entry made, or a heartbeat, or the end of a stream
// whose events are no longer held.
//
// Every line carries the stream's cursor: Index, and Offset for an event
// (its place among the events of entry Index). A reader that resumes with
// the cursor of the last line it processed (index=Index, and offset=Offset
// when the line has one) misses nothing and repeats nothing.
type Event struct {
	Index uint64 `json:"index"`
	// Offset is set on events (from 0), never on heartbeats: a heartbeat's
	// index covers its whole entry.
	Offset *int   `json:"offset,omitempty"`
	Topic  string `json:"topic,omitempty"`
	// Type is job-status, job-restart, job-forgotten, execution-state,
	// executor-status, leader-established; heartbeat; gone.
	Type string `json:"type"`
	// Time is the command's time, unix ms on the leader's clock.
	Time int64 `json:"time_ms,omitempty"`

	Job       string `json:"job,omitempty"`
	Execution string `json:"execution,omitempty"`
	Vertex    string `json:"vertex,omitempty"`
	// Subtask and Attempt are set on execution-state events.
	Subtask  *int   `json:"subtask,omitempty"`
	Attempt  *int   `json:"attempt,omitempty"`
	Executor string `json:"executor,omitempty"`
	// State and Previous: the execution state, job status or executor
	// status after and before the change ("" before: new).
	State    string `json:"state,omitempty"`
	Previous string `json:"previous,omitempty"`
	Message  string `json:"message,omitempty"`
	// Reason is the kind of failure a job-restart answers.
	Reason   string `json:"reason,omitempty"`
	Restarts *int   `json:"restarts,omitempty"`
	// Node and FencingToken: leader-established.
	Node         string `json:"node,omitempty"`
	FencingToken uint64 `json:"fencing_token,omitempty"`

	// OldestIndex and Error: gone.
	OldestIndex *uint64 `json:"oldest_index,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// Event line types that are not changes.
const (
	EventHeartbeat = "heartbeat"
	EventGone      = "gone"
)

// EventsGone is the body of a 410 answer to GET /v1/events: the events
// after the asked-for index are no longer held by that master. Read the
// state again and resume from its X-Jobmaster-Index, or from OldestIndex.
type EventsGone struct {
	Error       string `json:"error"`
	OldestIndex uint64 `json:"oldest_index"`
}

// IndexHeader carries, on reads of the state (jobs, a job, the cluster),
// the applied index the answer was read at: an event stream resumed from
// it continues the answer exactly.
const IndexHeader = "X-Jobmaster-Index"

// LeaderHeader names, on every answer of a master, the HTTP address
// (host:port) of the leader as that master knows it, when it knows one: a
// client that has the leader among its addresses sends its next request
// there, and no master forwards it.
const LeaderHeader = "X-Jobmaster-Leader"
