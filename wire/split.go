package wire

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
)

// MaxDeployBytes is the most bytes a leader puts in one deploy, in
// whichever format it sends: below the 1 MiB an executor reads of a
// request (api.MaxBodyBytes; a test in package master holds the two
// together), with room to spare for what the estimate of SplitDeploy
// leaves out.
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
	return split(l, tasks, maxBytes, jsonSizes{})
}

// SplitDeployBinary is SplitDeploy for requests sent in binary
// (AppendDeploy): at most maxBytes of binary each.
func SplitDeployBinary(l Leader, tasks []Task, maxBytes int) []DeployRequest {
	return split(l, tasks, maxBytes, &binarySizes{})
}

// sizes estimates, from above, what a request takes in one format: its
// leader and the list around the groups, a group without its tasks
// (with what separates it from the next), and a task in its group.
type sizes interface {
	base(l Leader) int
	group(g *TaskGroup) int
	task(t Task) int
}

func split(l Leader, tasks []Task, maxBytes int, sz sizes) []DeployRequest {
	if maxBytes <= 0 {
		maxBytes = MaxDeployBytes
	}
	base := sz.base(l)
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
			g = &group{tmpl: TaskGroup{JobID: t.JobID, Vertex: t.Vertex, Parallelism: t.Parallelism, Command: t.Command, Env: t.Env,
				Outputs: t.Outputs, Inputs: t.Inputs, Resources: t.Resources, Subtasks: []int{}}}
			g.size = sz.group(&g.tmpl)
			groups[k] = g
		}
		cost := sz.task(t)
		if !inChunk[g] {
			cost += g.size
		}
		if len(chunk) > 0 && size+cost > maxBytes {
			out = append(out, NewDeployRequest(l, chunk))
			chunk, size, inChunk = nil, base, make(map[*group]bool)
			cost = sz.task(t) + g.size
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

// jsonSizes sizes JSON: encoding/json's own output, and a task's three
// numbers with their commas.
type jsonSizes struct{}

func (jsonSizes) base(l Leader) int { return jsonSize(DeployRequest{Leader: l, Groups: []TaskGroup{}}) }

func (jsonSizes) group(g *TaskGroup) int { return jsonSize(g) + 1 } // +1: the comma between groups

func (jsonSizes) task(t Task) int {
	return len(strconv.Itoa(t.Subtask)) + len(strconv.Itoa(t.Attempt)) + len(strconv.Itoa(t.Slot)) + 3
}

func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// binarySizes sizes the binary format: AppendDeploy's own output (written
// into one scratch buffer), with room for counts that grow as elements
// are added (a uvarint of a count below 2^35 takes at most five bytes).
type binarySizes struct{ scratch []byte }

func (s *binarySizes) base(l Leader) int {
	return len(AppendDeploy(nil, &DeployRequest{Leader: l})) + 4
}

func (s *binarySizes) group(g *TaskGroup) int {
	s.scratch = appendGroup(s.scratch[:0], g)
	return len(s.scratch) + 4
}

func (s *binarySizes) task(t Task) int {
	return varintLen(t.Subtask) + varintLen(t.Attempt) + varintLen(t.Slot)
}

func varintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return len(binary.AppendVarint(b[:0], int64(n)))
}
