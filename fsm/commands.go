package fsm

import (
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// CommandType is the first byte of an encoded command. Numbers are
// append-only: never reuse or renumber one, since the log and snapshots
// written by older versions must keep decoding.
type CommandType uint8

// Command types.
const (
	TypeEstablishLeadership CommandType = 1
	TypeSubmitJob           CommandType = 2
	TypeCancelJob           CommandType = 3
	TypePlaceRegion         CommandType = 4
	TypeReportExecutions    CommandType = 5
	TypeFailExecutions      CommandType = 6
	TypeExecutorLost        CommandType = 7
	TypeRestartRegions      CommandType = 8
	TypeForgetJobs          CommandType = 9
	TypeLosePartitions      CommandType = 10
	TypeBootstrapACL        CommandType = 11
	TypeCreateACLToken      CommandType = 12
	TypeDeleteACLToken      CommandType = 13
	TypeDrainExecutor       CommandType = 14
	TypeUndrainExecutor     CommandType = 15
	TypeMoveExecutor        CommandType = 16
	TypeRestoreIntent       CommandType = 17
)

// lastType is the highest command type number.
const lastType = TypeRestoreIntent

// LastCommandType is the newest command type this version applies, as
// `jobmaster version` reports it.
const LastCommandType = lastType

func (t CommandType) String() string {
	switch t {
	case TypeEstablishLeadership:
		return "establish-leadership"
	case TypeSubmitJob:
		return "submit-job"
	case TypeCancelJob:
		return "cancel-job"
	case TypePlaceRegion:
		return "place-region"
	case TypeReportExecutions:
		return "report-executions"
	case TypeFailExecutions:
		return "fail-executions"
	case TypeExecutorLost:
		return "executor-lost"
	case TypeRestartRegions:
		return "restart-regions"
	case TypeForgetJobs:
		return "forget-jobs"
	case TypeLosePartitions:
		return "lose-partitions"
	case TypeBootstrapACL:
		return "bootstrap-acl"
	case TypeCreateACLToken:
		return "create-acl-token"
	case TypeDeleteACLToken:
		return "delete-acl-token"
	case TypeDrainExecutor:
		return "drain-executor"
	case TypeUndrainExecutor:
		return "undrain-executor"
	case TypeMoveExecutor:
		return "move-executor"
	case TypeRestoreIntent:
		return "restore-intent"
	}
	return "unknown"
}

// Command is a logical change to the state.
type Command interface {
	Type() CommandType
	// token is the fencing token the command was proposed under.
	token() uint64
}

// Fenced is embedded in every command a leader proposes: Token is the
// proposing leader's fencing token and Time the leader's clock (unix ms)
// when it proposed the command.
type Fenced struct {
	Token uint64 `codec:"tok"`
	Time  int64  `codec:"t"`
}

func (f Fenced) token() uint64 { return f.Token }

// when is the command's time.
func (f Fenced) when() int64 { return f.Time }

// EstablishLeadership is committed by a new leader after its Barrier; the
// entry's log index becomes the epoch (the fencing token).
//
// Cluster, when set, names the cluster from now on: the first leader of a
// cluster, and the first after a snapshot restore, pick a new id.
type EstablishLeadership struct {
	Node    string `codec:"n"`
	Cluster string `codec:"c,omitempty"`
	// Aborted names the cluster id of a restore announced (RestoreIntent)
	// that the new leader's state does not have: it did not take, and a
	// master whose state has that id diverged (restoreintent.go).
	Aborted string `codec:"ab,omitempty"`
	// Expect, when set, is the cluster id of the new leader's state: every
	// master that applied what the leader did has it, and a master whose
	// state has another diverged (restoreintent.go). Empty when the leader
	// names the cluster (Cluster).
	Expect string `codec:"x,omitempty"`
}

// SubmitJob adds a job. Submitting the same spec under the same id again is a
// no-op; a different spec under a taken id is a conflict.
type SubmitJob struct {
	Fenced
	ID   string        `codec:"id"`
	Spec *jobspec.Spec `codec:"spec"`
}

// CancelJob cancels a job; cancelling an ended or cancelling job is a no-op.
type CancelJob struct {
	Fenced
	ID string `codec:"id"`
}

// PlaceRegion places every execution of a ready region: each slot key
// (group, subtask index) of the region onto an executor slot. All or nothing.
type PlaceRegion struct {
	Fenced
	Job    string       `codec:"j"`
	Region int          `codec:"r"`
	Slots  []SlotAssign `codec:"s"`
}

// SlotAssign puts subtask Index of slot sharing group Group onto a slot.
type SlotAssign struct {
	Group    string `codec:"g"`
	Index    int    `codec:"i"`
	Executor string `codec:"e"`
	Slot     int    `codec:"s"`
}

// ReportExecutions records what an executor said about executions placed on
// it: reporting an execution acknowledges its deployment, and a state further
// along its life than the recorded one is recorded.
type ReportExecutions struct {
	Fenced
	Executor string         `codec:"e"`
	Updates  []ReportUpdate `codec:"u"`
}

// ReportUpdate is one execution's state as its executor reported it. Bytes
// is, for a FINISHED producer, the size of its partition; Unavailable, for
// a consumer that FAILED because it could not read inputs, the producer
// executions whose partitions it could not fetch.
type ReportUpdate struct {
	ID          string     `codec:"id"`
	State       wire.State `codec:"s"`
	Message     string     `codec:"m,omitempty"`
	Bytes       int64      `codec:"b,omitempty"`
	Unavailable []string   `codec:"un,omitempty"`
	// Fenced: a CANCELED that its executor's lease expiry made (no leader
	// heartbeated it for its lease: a leader was missing, or could not
	// reach it), no fault of the task's. Its restart is not counted.
	Fenced bool `codec:"f,omitempty"`
}

// FailExecutions fails executions placed on Executor that the leader found
// missing there or whose deployment stayed unacknowledged too long.
// Executions being cancelled become CANCELED instead.
type FailExecutions struct {
	Fenced
	Executor string   `codec:"e"`
	IDs      []string `codec:"ids"`
	Reason   string   `codec:"m"`
}

// ExecutorLost fails every execution placed on an executor that stopped
// answering heartbeats.
type ExecutorLost struct {
	Fenced
	Executor string `codec:"e"`
}

// RestartRegions starts new attempts in the job's restarting regions whose
// restart time has come and whose executions have all ended.
type RestartRegions struct {
	Fenced
	Job string `codec:"j"`
}

// ForgetJobs removes ended jobs (garbage collection): the job, its
// executions and its id, which may then be used again. A job that has not
// ended is left alone.
//
// PruneBefore (unix ms) also drops the tombstones of jobs forgotten before
// it, each folded into the attempt floor of its id's bucket
// (generations.go): a later job under the id still starts above them.
type ForgetJobs struct {
	Fenced
	IDs         []string `codec:"ids"`
	PruneBefore int64    `codec:"prune,omitempty"`
}

// LosePartitions records that an executor no longer holds partitions the
// state tracks on it (a report taken after they were recorded lacks them).
// A partition a consumer still needs makes its producer run again.
type LosePartitions struct {
	Fenced
	Executor string   `codec:"e"`
	IDs      []string `codec:"ids"`
	Reason   string   `codec:"m"`
}

// Type implementations.
func (*EstablishLeadership) Type() CommandType { return TypeEstablishLeadership }
func (*SubmitJob) Type() CommandType           { return TypeSubmitJob }
func (*CancelJob) Type() CommandType           { return TypeCancelJob }
func (*PlaceRegion) Type() CommandType         { return TypePlaceRegion }
func (*ReportExecutions) Type() CommandType    { return TypeReportExecutions }
func (*FailExecutions) Type() CommandType      { return TypeFailExecutions }
func (*ExecutorLost) Type() CommandType        { return TypeExecutorLost }
func (*RestartRegions) Type() CommandType      { return TypeRestartRegions }
func (*ForgetJobs) Type() CommandType          { return TypeForgetJobs }
func (*LosePartitions) Type() CommandType      { return TypeLosePartitions }

func (*EstablishLeadership) token() uint64 { return 0 }

// newCommand returns an empty command of the given type, or nil.
func newCommand(t CommandType) Command {
	switch t {
	case TypeEstablishLeadership:
		return &EstablishLeadership{}
	case TypeSubmitJob:
		return &SubmitJob{}
	case TypeCancelJob:
		return &CancelJob{}
	case TypePlaceRegion:
		return &PlaceRegion{}
	case TypeReportExecutions:
		return &ReportExecutions{}
	case TypeFailExecutions:
		return &FailExecutions{}
	case TypeExecutorLost:
		return &ExecutorLost{}
	case TypeRestartRegions:
		return &RestartRegions{}
	case TypeForgetJobs:
		return &ForgetJobs{}
	case TypeLosePartitions:
		return &LosePartitions{}
	case TypeBootstrapACL:
		return &BootstrapACL{}
	case TypeCreateACLToken:
		return &CreateACLToken{}
	case TypeDeleteACLToken:
		return &DeleteACLToken{}
	case TypeDrainExecutor:
		return &DrainExecutor{}
	case TypeUndrainExecutor:
		return &UndrainExecutor{}
	case TypeMoveExecutor:
		return &MoveExecutor{}
	case TypeRestoreIntent:
		return &RestoreIntent{}
	}
	return nil
}
