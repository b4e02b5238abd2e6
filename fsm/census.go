package fsm

import "jobmaster/wire"

// Census counts what the state holds, for the masters' metrics.
type Census struct {
	Jobs       map[JobStatus]int
	Executions map[wire.State]int
	// Partitions and PartitionBytes are the tracked result partitions and
	// the bytes in them.
	Partitions     int
	PartitionBytes int64
}

// JobStatuses lists every job status; ExecutionStates every execution
// state.
var (
	JobStatuses     = []JobStatus{JobCreated, JobRunning, JobRestarting, JobFailing, JobFailed, JobCancelling, JobCanceled, JobFinished}
	ExecutionStates = []wire.State{wire.StateScheduled, wire.StateDeploying, wire.StateRunning, wire.StateCanceling,
		wire.StateFinished, wire.StateCanceled, wire.StateFailed}
)

// Census counts the jobs by status, the executions by state and the
// partitions. It costs a pass over every execution.
func (s *State) Census() Census {
	c := Census{Jobs: make(map[JobStatus]int, len(JobStatuses)), Executions: make(map[wire.State]int, len(ExecutionStates)),
		Partitions: len(s.partitions)}
	for _, j := range s.jobs {
		c.Jobs[j.Status]++
	}
	for _, e := range s.execs {
		c.Executions[e.State]++
	}
	for _, p := range s.partitions {
		c.PartitionBytes += p.Bytes
	}
	return c
}
