package fsm

import (
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// JobStatus is the status of a job.
type JobStatus string

// Job statuses.
const (
	JobCreated    JobStatus = "CREATED"
	JobRunning    JobStatus = "RUNNING"
	JobRestarting JobStatus = "RESTARTING"
	JobFailing    JobStatus = "FAILING"
	JobFailed     JobStatus = "FAILED"
	JobCancelling JobStatus = "CANCELLING"
	JobCanceled   JobStatus = "CANCELED"
	JobFinished   JobStatus = "FINISHED"
)

// Terminal reports whether the job has ended.
func (s JobStatus) Terminal() bool {
	return s == JobFailed || s == JobCanceled || s == JobFinished
}

// ending reports whether the job is winding down towards a terminal status.
func (s JobStatus) ending() bool { return s == JobFailing || s == JobCancelling }

// RegionStatus is the scheduling status of a pipelined region.
type RegionStatus uint8

// Region statuses.
const (
	// RegionWaiting: some upstream region has not FINISHED.
	RegionWaiting RegionStatus = iota
	// RegionReady: every execution is SCHEDULED and the region may be placed.
	RegionReady
	// RegionRunning: placed; its executions are deploying or running.
	RegionRunning
	// RegionRestarting: failed; waiting for its executions to end and for the
	// restart delay to pass.
	RegionRestarting
	// RegionFinished: every subtask FINISHED.
	RegionFinished
	// RegionStopped: the job is cancelling, failing or has ended.
	RegionStopped
)

var regionStatusNames = [...]string{"waiting", "ready", "running", "restarting", "finished", "stopped"}

func (s RegionStatus) String() string {
	if int(s) < len(regionStatusNames) {
		return regionStatusNames[s]
	}
	return "unknown"
}

// Job is a submitted job. Spec is normalized and never changes after submit.
type Job struct {
	ID          string        `codec:"id,omitempty"`
	Spec        *jobspec.Spec `codec:"spec"`
	Status      JobStatus     `codec:"st"`
	SubmitIndex uint64        `codec:"si"`
	SubmitTime  int64         `codec:"stm"`          // unix milliseconds, from the submit command
	EndTime     int64         `codec:"et,omitempty"` // unix milliseconds; 0 until terminal
	Message     string        `codec:"msg,omitempty"`
	// Restarts counts region restarts carried out.
	Restarts int `codec:"rs,omitempty"`
	// UncountedRestarts counts the commands that restarted regions of the
	// job for a cause the restart strategy does not count (a drain's move,
	// a lease that ran out for want of a leader): each lets a subtask run
	// once more than the strategy's budget.
	UncountedRestarts int           `codec:"ur,omitempty" json:",omitempty"`
	Backoff           RestartState  `codec:"bo"`
	Vertices          []VertexState `codec:"vx"`
	Regions           []RegionState `codec:"rg"`
	// AttemptFloor, set only by a restore (State.CarryAttempts), is the
	// attempt this job's restarts go to at least: the state restored
	// went back in time, and its attempts up to here were used since.
	AttemptFloor int `codec:"af,omitempty" json:",omitempty"`
}

// VertexState is the per-vertex part of a job's state.
type VertexState struct {
	Region int `codec:"r"`
	// Attempts holds the current attempt of each subtask.
	Attempts []int `codec:"a"`
	// Finished counts subtasks whose current attempt has FINISHED.
	Finished int `codec:"f"`
	// Previous holds, per subtask, how the attempt before the current one
	// ended: nil until a subtask of the vertex restarts, and a zero value
	// for a subtask still at its first attempt. A master that predates it
	// drops it from snapshots, which it reads all the same.
	Previous []PreviousAttempt `codec:"pa,omitempty" json:",omitempty"`
}

// PreviousAttempt is how a replaced attempt of a subtask ended: what job
// status shows as its last failure, and where it ran, so that its log can
// be read through a master (the only earlier attempt whose executor the
// state keeps).
type PreviousAttempt struct {
	Attempt int        `codec:"a"`
	State   wire.State `codec:"s,omitempty" json:",omitempty"`
	Message string     `codec:"m,omitempty" json:",omitempty"`
	EndTime int64      `codec:"et,omitempty" json:",omitempty"`
	// Executor is the executor the attempt was placed on: "" when it was
	// replaced before it was placed, or recorded by a master that predates
	// this field (which drops it from snapshots, and reads them all the
	// same).
	Executor string `codec:"e,omitempty" json:",omitempty"`
}

// RegionState is the per-region part of a job's state. The region's shape
// (vertices, upstream, downstream) comes from jobspec.Spec.Regions.
type RegionState struct {
	Vertices   []int        `codec:"v"`
	Upstream   []int        `codec:"u,omitempty"`
	Downstream []int        `codec:"d,omitempty"`
	Status     RegionStatus `codec:"s"`
	// RestartAt is when a restarting region may restart (unix ms).
	RestartAt int64 `codec:"ra,omitempty"`
	// Rerun, when set, limits a restart to these subtasks: the producers
	// whose partitions were lost, in a region whose other subtasks' output
	// is still there (partitions.go). Empty: every subtask restarts.
	Rerun []Subtask `codec:"rr,omitempty" json:",omitempty"`
}

// Subtask names one subtask of a job: a vertex (by index) and its index.
type Subtask struct {
	Vertex int `codec:"v"`
	Index  int `codec:"i"`
}

// RestartState is the restart strategy's bookkeeping for one job.
type RestartState struct {
	// Failures counts failure events: all of them for fixed-delay, those
	// since the last backoff reset for exponential-delay.
	Failures int `codec:"f,omitempty"`
	// FailureTimes are the recent failure times for failure-rate (unix ms).
	FailureTimes []int64 `codec:"ft,omitempty"`
	// LastFailure is the time of the latest failure event (unix ms).
	LastFailure int64 `codec:"lf,omitempty"`
	// BackoffMs is the current exponential-delay backoff.
	BackoffMs int64 `codec:"b,omitempty"`
}

// Execution is one attempt of one subtask.
//
// In snapshots an execution is a msgpack array (fields in this order), the
// bulk of a snapshot: new fields go at the end, where older snapshots simply
// lack them.
type Execution struct {
	_struct struct{} `codec:",toarray"` //nolint:unused // msgpack layout marker

	ID     string `codec:"id,omitempty"`
	Job    string `codec:"j,omitempty"`
	Vertex string `codec:"v,omitempty"`
	// VertexIndex is the vertex's position in the job spec.
	VertexIndex int        `codec:"vi"`
	Subtask     int        `codec:"s"`
	Attempt     int        `codec:"a"`
	State       wire.State `codec:"st"`
	Executor    string     `codec:"e,omitempty"`
	Slot        int        `codec:"sl"`
	// Epoch is the fencing token of the leader that placed the execution.
	Epoch uint64 `codec:"ep"`
	// Deployed is false while the deployment is pending (not acknowledged).
	Deployed bool `codec:"d"`
	// DeployIndex and AckIndex are the log indexes of the placement and of
	// the acknowledgment.
	DeployIndex uint64 `codec:"di"`
	AckIndex    uint64 `codec:"ai,omitempty"`
	DeployTime  int64  `codec:"dt"`           // unix ms of the placement
	EndTime     int64  `codec:"et,omitempty"` // unix ms of the terminal state
	Message     string `codec:"m,omitempty"`
	// StartTime is when the leader recorded the execution RUNNING (unix
	// ms; 0 if it never was, or in a snapshot older than the field). It
	// comes last: the layout is an array, and an older, shorter one still
	// decodes.
	StartTime int64 `codec:"rt" json:",omitempty"`
}

// ExecutionID formats the id of an execution; the format is the wire
// protocol's, where executors derive ids from deployed tasks.
func ExecutionID(job, vertex string, subtask, attempt int) string {
	return wire.ExecutionID(job, vertex, subtask, attempt)
}

// Partition is a result partition the state tracks: the output of one
// FINISHED producer execution, the current attempt of its subtask, held by
// the executor that ran it until no consumer region needs it any more
// (partitions.go).
type Partition struct {
	// ID is the producer execution's id.
	ID          string `codec:"id"`
	Job         string `codec:"j"`
	VertexIndex int    `codec:"vi"`
	Subtask     int    `codec:"s"`
	Attempt     int    `codec:"a"`
	Executor    string `codec:"e"`
	Bytes       int64  `codec:"b"`
	// Index is the log index at which it was recorded: a report asked for
	// before then may lack it.
	Index uint64 `codec:"i"`
}

// Tombstone is what remains of a forgotten job: a job submitted again under
// its id starts at attempt Next, so none of its execution ids was used by
// the forgotten one (an executor may still hold those). At is when the job
// was forgotten (unix ms).
type Tombstone struct {
	ID   string `codec:"id"`
	Next int    `codec:"n"`
	At   int64  `codec:"at"`
}
