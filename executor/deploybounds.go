package executor

import (
	"fmt"

	"jobmaster/executor/partition"
	"jobmaster/jobspec"
	"jobmaster/wire"
)

// maxDeployTasks bounds the tasks of one deploy: a leader reads an answer
// that lists at most wire.MaxReportExecutions executions, so no deploy a
// leader could count as answered carries more.
const maxDeployTasks = wire.MaxReportExecutions

// checkDeploy refuses a deploy past what any leader sends, before it is
// expanded into tasks (DeployRequest.Tasks): each task gets an execution
// id built from its group's job and vertex ids, so a body of a few hundred
// KiB with a 100 KiB job id and 10,000 subtask triples would otherwise
// make gigabytes. Each group must have job and vertex ids of 1 to
// jobspec.MaxIDLength bytes (what a master accepts), a parallelism of 1 to
// partition.MaxParallelism, whole triples, and at most MaxParallelism of
// them (a group is subtasks of one vertex); the deploy at most
// maxDeployTasks tasks in all. What it passes makes at most about 500
// bytes per task. Its errors name the bound.
func checkDeploy(req *wire.DeployRequest) error {
	total := 0
	for i := range req.Groups {
		g := &req.Groups[i]
		for _, id := range []struct{ what, v string }{{"job id", g.JobID}, {"vertex id", g.Vertex}} {
			if len(id.v) == 0 || len(id.v) > jobspec.MaxIDLength {
				return fmt.Errorf("group %d: a %s of %d bytes: ids are 1 to %d bytes", i, id.what, len(id.v), jobspec.MaxIDLength)
			}
		}
		if g.Parallelism < 1 || g.Parallelism > partition.MaxParallelism {
			return fmt.Errorf("group %d (%s/%s): parallelism %d out of range 1..%d", i, g.JobID, g.Vertex, g.Parallelism, partition.MaxParallelism)
		}
		if len(g.Subtasks)%3 != 0 {
			return fmt.Errorf("group %d (%s/%s): subtasks has %d numbers, not three per task", i, g.JobID, g.Vertex, len(g.Subtasks))
		}
		n := len(g.Subtasks) / 3
		if n > partition.MaxParallelism {
			return fmt.Errorf("group %d (%s/%s): %d tasks, at most %d (the subtasks of one vertex)", i, g.JobID, g.Vertex, n, partition.MaxParallelism)
		}
		if total += n; total > maxDeployTasks {
			return fmt.Errorf("more than %d tasks in one deploy (a leader reads no answer listing more)", maxDeployTasks)
		}
	}
	return nil
}
