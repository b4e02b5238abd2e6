package executor

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"jobmaster/executor/partition"
	"jobmaster/wire"
)

// Bounds on what peers send about edges, beyond those of the partition
// package (partition.MaxParallelism, MaxEdges, MaxSources, MaxOffset).
const (
	// maxAddr bounds a source's executor address and id.
	maxAddr = 256
	// maxCluster bounds a cluster id (the masters' are 16 hex digits).
	maxCluster = 128
)

// validCluster accepts a cluster id: empty, or at most maxCluster
// characters of [A-Za-z0-9._-]. It is written to the fencing-token file,
// one per line.
func validCluster(c string) error {
	if c == "" {
		return nil
	}
	if len(c) > maxCluster {
		return fmt.Errorf("cluster id longer than %d bytes", maxCluster)
	}
	if err := validComponent(c); err != nil {
		return fmt.Errorf("cluster id: %w", err)
	}
	return nil
}

func validMode(m string) error {
	if m != wire.ModeBlocking && m != wire.ModePipelined {
		return fmt.Errorf("mode %q: want %q or %q", m, wire.ModeBlocking, wire.ModePipelined)
	}
	return nil
}

// validateOutputs checks a task's outputs: distinct consumer vertices with
// valid names, a parallelism within bounds, a mode; on a forward edge the
// consumer has a subtask of the producer's index.
func validateOutputs(t wire.Task) error {
	if len(t.Outputs) > partition.MaxEdges {
		return fmt.Errorf("execution %s: %d outputs, at most %d", t.ExecutionID, len(t.Outputs), partition.MaxEdges)
	}
	seen := make(map[string]bool, len(t.Outputs))
	for _, o := range t.Outputs {
		if err := validComponent(o.Vertex); err != nil {
			return fmt.Errorf("execution %s: output vertex: %w", t.ExecutionID, err)
		}
		if seen[o.Vertex] {
			return fmt.Errorf("execution %s: output vertex %q listed twice", t.ExecutionID, o.Vertex)
		}
		seen[o.Vertex] = true
		if o.Parallelism < 1 || o.Parallelism > partition.MaxParallelism {
			return fmt.Errorf("execution %s: output %q: parallelism %d out of range 1..%d", t.ExecutionID, o.Vertex, o.Parallelism, partition.MaxParallelism)
		}
		if err := validMode(o.Mode); err != nil {
			return fmt.Errorf("execution %s: output %q: %w", t.ExecutionID, o.Vertex, err)
		}
		if o.Forward && t.Subtask >= o.Parallelism {
			return fmt.Errorf("execution %s: forward output %q has no subtask %d (parallelism %d)", t.ExecutionID, o.Vertex, t.Subtask, o.Parallelism)
		}
	}
	return nil
}

// validateInputs checks the inputs of the tasks of one vertex of job: each
// from a distinct producer vertex with a valid name and a mode, with at
// most MaxParallelism sources, each naming a distinct subtask, an
// execution of that subtask of that vertex of the job, and an executor.
// The forward check, which depends on the subtask, is readsFrom's.
func validateInputs(job string, inputs []wire.Input) error {
	if len(inputs) > partition.MaxEdges {
		return fmt.Errorf("%d inputs, at most %d", len(inputs), partition.MaxEdges)
	}
	seen := make(map[string]bool, len(inputs))
	total := 0
	for _, in := range inputs {
		if err := validComponent(in.Vertex); err != nil {
			return fmt.Errorf("input vertex: %w", err)
		}
		if seen[in.Vertex] {
			return fmt.Errorf("input vertex %q listed twice", in.Vertex)
		}
		seen[in.Vertex] = true
		if err := validMode(in.Mode); err != nil {
			return fmt.Errorf("input %q: %w", in.Vertex, err)
		}
		if len(in.Sources) < 1 || len(in.Sources) > partition.MaxParallelism {
			return fmt.Errorf("input %q: %d sources, want 1..%d", in.Vertex, len(in.Sources), partition.MaxParallelism)
		}
		if total += len(in.Sources); total > partition.MaxSources {
			return fmt.Errorf("more than %d sources in all", partition.MaxSources)
		}
		subs := make(map[int]bool, len(in.Sources))
		for _, src := range in.Sources {
			if src.Subtask < 0 || src.Subtask >= partition.MaxParallelism || subs[src.Subtask] {
				return fmt.Errorf("input %q: source subtask %d out of range or listed twice", in.Vertex, src.Subtask)
			}
			subs[src.Subtask] = true
			if err := validateExecutionID(src.Execution); err != nil {
				return fmt.Errorf("input %q: source %d: %w", in.Vertex, src.Subtask, err)
			}
			if !isExecutionOf(src.Execution, job, in.Vertex, src.Subtask) {
				return fmt.Errorf("input %q: source %d: execution %s is not of subtask %d of %s/%s", in.Vertex, src.Subtask, src.Execution, src.Subtask, job, in.Vertex)
			}
			if src.Addr == "" || len(src.Addr) > maxAddr || len(src.Executor) > maxAddr {
				return fmt.Errorf("input %q: source %d: executor address missing or longer than %d bytes", in.Vertex, src.Subtask, maxAddr)
			}
		}
	}
	return nil
}

// isExecutionOf reports whether execution id (valid) is an attempt of
// subtask sub of vertex of job.
func isExecutionOf(id, job, vertex string, sub int) bool {
	prefix := job + "/" + vertex + "/" + strconv.Itoa(sub) + "/"
	return len(id) > len(prefix) && id[:len(prefix)] == prefix
}

// readsFrom is the sources of in that subtask reads: all of them, or on a
// forward edge the one of its own index (ok false if there is none).
func readsFrom(in wire.Input, subtask int) (srcs []wire.Source, ok bool) {
	if !in.Forward {
		return in.Sources, true
	}
	for _, src := range in.Sources {
		if src.Subtask == subtask {
			return []wire.Source{src}, true
		}
	}
	return nil, false
}

// validateEdges checks t's outputs and inputs; checked, keyed by the first
// input of a group's shared slice, remembers the inputs of the tasks of one
// vertex already found valid, so a deploy of many subtasks checks them once.
func validateEdges(t wire.Task, checked map[*wire.Input]bool) error {
	if err := validateOutputs(t); err != nil {
		return err
	}
	if len(t.Inputs) == 0 {
		return nil
	}
	if key := &t.Inputs[0]; !checked[key] {
		if err := validateInputs(t.JobID, t.Inputs); err != nil {
			return fmt.Errorf("execution %s: %w", t.ExecutionID, err)
		}
		checked[key] = true
	}
	for _, in := range t.Inputs {
		if _, ok := readsFrom(in, t.Subtask); !ok {
			return fmt.Errorf("execution %s: forward input %q has no source for subtask %d", t.ExecutionID, in.Vertex, t.Subtask)
		}
	}
	return nil
}

// fetchRequest is a fetch of partition data as a peer sent it.
type fetchRequest struct {
	partition.Request
	Cluster string
	Token   uint64
}

// parseFetch reads and bounds the query and fence headers of a fetch
// (wire.PathPartitionData). Its error is the 400 to answer with.
func parseFetch(v url.Values, h http.Header) (fetchRequest, error) {
	var q fetchRequest
	for k, vs := range v {
		if len(vs) > 1 {
			return q, fmt.Errorf("query parameter %s given %d times", k, len(vs))
		}
	}
	q.Producer = v.Get("id")
	if q.Producer == "" {
		return q, errors.New("missing query parameter id (the producer's execution id)")
	}
	if err := validateExecutionID(q.Producer); err != nil {
		return q, err
	}
	q.Consumer = v.Get("consumer")
	if err := validComponent(q.Consumer); err != nil {
		return q, fmt.Errorf("consumer %q (a vertex id): %w", q.Consumer, err)
	}
	idx, ok := partition.ParseIndex(v.Get("index"))
	if !ok {
		return q, fmt.Errorf("index %q: want a subtask index 0..%d", v.Get("index"), partition.MaxParallelism-1)
	}
	q.Index = idx
	if s := v.Get("offset"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > partition.MaxOffset {
			return q, fmt.Errorf("offset %q: want a number of bytes 0..%d", s, int64(partition.MaxOffset))
		}
		q.Offset = n
	}
	switch f := v.Get("follow"); f {
	case "", "0":
	case "1":
		q.Follow = true
	default:
		return q, fmt.Errorf("follow %q: want 1 or 0", f)
	}
	q.Cluster = h.Get(wire.HeaderCluster)
	if err := validCluster(q.Cluster); err != nil {
		return q, fmt.Errorf("header %s: %w", wire.HeaderCluster, err)
	}
	tok := h.Get(wire.HeaderToken)
	if tok == "" {
		return q, fmt.Errorf("missing header %s: a fetch carries its executor's fencing token", wire.HeaderToken)
	}
	n, err := strconv.ParseUint(tok, 10, 64)
	if err != nil {
		return q, fmt.Errorf("header %s %q: want a fencing token", wire.HeaderToken, tok)
	}
	q.Token = n
	return q, nil
}
