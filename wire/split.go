package wire

import (
	"encoding/json"
	"strconv"
)

// MaxDeployBytes is the most bytes of JSON a leader puts in one deploy:
// below the 1 MiB an executor reads of a request (api.MaxBodyBytes; a
// test in package master holds the two together), with room to spare for
// what the estimate of SplitDeploy leaves out.
const MaxDeployBytes = 1<<20 - 64<<10

// SplitDeploy groups tasks into deploy requests of at most maxBytes of
// JSON each (MaxDeployBytes when maxBytes is 0), in the order the tasks
// come: a deploy of thousands of tasks with large commands, envs or inputs
// becomes several requests, which the executor takes one after another
// (each task's deployment is acknowledged by the answer to its own
// request). A task whose group alone is larger goes in a request of its
// own, which the executor refuses (413): the job spec's limits
// (jobspec.MaxTaskBytes) keep that from happening but for inputs of
// extreme width.
func SplitDeploy(l Leader, tasks []Task, maxBytes int) []DeployRequest {
	if maxBytes <= 0 {
		maxBytes = MaxDeployBytes
	}
	base := jsonSize(DeployRequest{Leader: l, Groups: []TaskGroup{}})
	type key struct{ job, vertex string }
	// group is the estimate of one group: its template, to tell whether a
	// task belongs to it (TaskGroup.holds), and its size without tasks.
	type group struct {
		tmpl TaskGroup
		size int
	}
	groups := make(map[key]*group)
	var out []DeployRequest
	var chunk []Task
	size := base
	inChunk := make(map[*group]bool)
	for _, t := range tasks {
		k := key{t.JobID, t.Vertex}
		g := groups[k]
		if g == nil || !g.tmpl.holds(t) {
			tmpl := TaskGroup{JobID: t.JobID, Vertex: t.Vertex, Parallelism: t.Parallelism, Command: t.Command, Env: t.Env,
				Outputs: t.Outputs, Inputs: t.Inputs, Resources: t.Resources, Subtasks: []int{}}
			g = &group{tmpl: tmpl, size: jsonSize(tmpl) + 1} // +1: the comma between groups
			groups[k] = g
		}
		cost := len(strconv.Itoa(t.Subtask)) + len(strconv.Itoa(t.Attempt)) + len(strconv.Itoa(t.Slot)) + 3
		if !inChunk[g] {
			cost += g.size
		}
		if len(chunk) > 0 && size+cost > maxBytes {
			out = append(out, NewDeployRequest(l, chunk))
			chunk, size, inChunk = nil, base, make(map[*group]bool)
			cost = len(strconv.Itoa(t.Subtask)) + len(strconv.Itoa(t.Attempt)) + len(strconv.Itoa(t.Slot)) + 3 + g.size
		}
		chunk = append(chunk, t)
		inChunk[g] = true
		size += cost
	}
	if len(chunk) > 0 {
		out = append(out, NewDeployRequest(l, chunk))
	}
	return out
}

func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}
