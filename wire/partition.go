package wire

import "slices"

// Data exchange between tasks (docs/architecture.md, "Result partitions").
//
// A producer is a task whose vertex has consumers; it sees
// JOBMASTER_OUTPUT_DIR, which holds an empty directory per consumer vertex
// C, and writes into C/<j> what subtask j of C must read. When it FINISHED,
// what it wrote is a partition: the output of one producer execution, named
// by the execution's id, kept by the producer's executor until a leader
// releases it. A consumer is a task whose vertex has inputs; it sees
// JOBMASTER_INPUT_DIR, which holds per producer vertex P the entries P/<i>:
// what subtask i of P wrote for it. A blocking input is regular files,
// fetched before the task starts; a pipelined one is named pipes, fed while
// the producer runs. Bytes move between executors directly: the consumer's
// executor fetches from the producer's (PathPartitionData), never through
// the masters.

// Edge modes and distributions, as in the job spec.
const (
	ModeBlocking  = "blocking"
	ModePipelined = "pipelined"
)

// Output is one vertex that consumes a task's output.
type Output struct {
	// Vertex is the consumer vertex C: the task writes C/<j> for subtask j.
	Vertex string `json:"vertex"`
	// Parallelism is C's: the files that count are C/0 to C/<p-1>.
	Parallelism int    `json:"parallelism"`
	Mode        string `json:"mode"`
	// Forward: a forward edge, on which only C/<the task's own index> is
	// delivered.
	Forward bool `json:"forward,omitempty"`
}

// Input is one vertex a task reads from.
type Input struct {
	// Vertex is the producer vertex P.
	Vertex  string `json:"vertex"`
	Mode    string `json:"mode"`
	Forward bool   `json:"forward,omitempty"`
	// Sources are the producer subtasks to read, one per subtask of P (the
	// same for every subtask of the consumer vertex): on a forward edge a
	// task reads only the source of its own index.
	Sources []Source `json:"sources"`
}

func (in Input) equal(o Input) bool {
	return in.Vertex == o.Vertex && in.Mode == o.Mode && in.Forward == o.Forward && slices.Equal(in.Sources, o.Sources)
}

// Source is one producer subtask's output, as the replicated state names
// it: the attempt to read and the executor that holds it. A consumer reads
// only from the attempt named here.
type Source struct {
	Subtask   int    `json:"subtask"`
	Execution string `json:"execution_id"`
	Executor  string `json:"executor"`
	// Addr is the executor's HTTP address.
	Addr string `json:"addr"`
}

// Partition is one partition an executor holds: the output of a FINISHED
// producer execution (ID is its execution id). It is the body of one entry
// of GET /v1/partitions and of Report.Partitions.
type Partition struct {
	ID      string `json:"id"`
	JobID   string `json:"job_id"`
	Vertex  string `json:"vertex"`
	Subtask int    `json:"subtask"`
	Attempt int    `json:"attempt"`
	Bytes   int64  `json:"bytes"`
}

// Partitions is the body of GET /v1/partitions.
type Partitions struct {
	Partitions []Partition `json:"partitions"`
}

// Executor endpoints of the data plane.
const (
	// PathRelease is the leader's request to delete partitions: a
	// ReleaseRequest, fenced like a cancel, answered 204. Unknown ids are
	// ignored.
	PathRelease = "/v1/internal/release"
	// PathPartitions is public: the partitions the executor holds.
	PathPartitions = "/v1/partitions"
	// PathPartitionData is another executor's fetch of the bytes one
	// consumer subtask reads from one producer execution:
	//
	//	GET /v1/internal/partition?id=<producer execution>&consumer=<vertex C>&index=<j>&offset=<n>[&follow=1]
	//
	// with the fetching executor's newest fence in the headers
	// HeaderCluster and HeaderToken: the holder answers 409 (StaleToken) to
	// a cluster it has seen replaced or a token older than the newest it
	// has seen, and never takes a newer fence from a fetch. The answer
	// streams the bytes from offset; with follow, it goes on streaming
	// while a running producer writes. The answer's trailer HeaderEnd says
	// how the stream ended (EndComplete: every byte, the producer
	// FINISHED), so a fetch that breaks midway is resumed at the offset it
	// reached, losing and duplicating nothing. An answer that ends without
	// the trailer (a connection cut, or a running producer fetched without
	// follow) is incomplete: fetch again from the offset reached. 404: the
	// holder does not hold it (released, lost, or a pipelined producer not
	// started yet). 400: a malformed or out-of-bounds parameter, or a
	// consumer and index the producer writes nothing for; 416: an offset
	// past the end of a complete output.
	PathPartitionData = "/v1/internal/partition"
	HeaderCluster     = "X-Jobmaster-Cluster"
	// HeaderToken is not X-Jobmaster-Token, the header that carries a
	// user's ACL token to the masters, so that the two never meet in one
	// request.
	HeaderToken = "X-Jobmaster-Fencing-Token"
	HeaderEnd   = "X-Jobmaster-End"
	// EndComplete: the stream holds every byte of the file. EndFailed: the
	// producer ended without FINISHED, or broke the stream; the bytes are
	// not a whole output.
	EndComplete = "complete"
	EndFailed   = "failed"
	// HeaderEndWhy, a trailer beside HeaderEnd (EndFailed), says why
	// when the producer broke the stream rather than ended without
	// finishing: EndShrank (it cut short a file it was streaming) or
	// EndReplaced (it replaced one).
	HeaderEndWhy = "X-Jobmaster-End-Why"
	EndShrank    = "shrank"
	EndReplaced  = "replaced"
)

// ReleaseRequest asks an executor to delete partitions (by producer
// execution id).
type ReleaseRequest struct {
	Leader
	IDs []string `json:"ids"`
}
