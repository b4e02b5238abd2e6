package partition

import (
	"io/fs"
	"strconv"

	"jobmaster/wire"
)

// Limits on what a peer may send: a deploy's edges and a fetch's
// parameters beyond them are refused (400). They match the job spec's own
// limits (package jobspec: 1000 vertices, parallelism 10000).
const (
	// MaxParallelism bounds a consumer vertex's parallelism, and so a
	// consumer index.
	MaxParallelism = 10000
	// MaxEdges bounds the outputs, and the inputs, of one task.
	MaxEdges = 1000
	// MaxSources bounds the producer subtasks one task reads, over all its
	// inputs.
	MaxSources = 100000
	// MaxOffset bounds a fetch's offset (1 PiB).
	MaxOffset = 1 << 50
)

// Output names which consumer of a producer a file is for, when it is
// data: Counts(outputs, subtask, consumer, name) is the one rule.
//
// A producer's output directory holds one directory per consumer vertex C
// (an Output's Vertex); in it, the file named j (a canonical decimal, 0 <=
// j < C's parallelism) is what subtask j of C reads. On a forward edge
// only the file named after the producer's own subtask index is data.
// Nothing else counts: other names, numbers out of range or spelled
// otherwise ("01", "+1"), and anything that is not a regular file (a
// directory, a symbolic link, a named pipe, a device) are ignored; a file
// that is missing is empty data.

// output returns the output of outputs whose consumer vertex is consumer.
func output(outputs []wire.Output, consumer string) (wire.Output, bool) {
	for _, o := range outputs {
		if o.Vertex == consumer {
			return o, true
		}
	}
	return wire.Output{}, false
}

// Wanted reports whether subtask index of consumer reads anything from a
// producer subtask with outputs: consumer is one of them, index is below
// its parallelism and, on a forward edge, is the producer's own index.
func Wanted(outputs []wire.Output, subtask int, consumer string, index int) bool {
	o, ok := output(outputs, consumer)
	if !ok || index < 0 || index >= o.Parallelism {
		return false
	}
	return !o.Forward || index == subtask
}

// Counts reports whether a file named name in the directory of consumer is
// data of a producer subtask with outputs (its type aside: see Keep).
func Counts(outputs []wire.Output, subtask int, consumer, name string) bool {
	j, ok := ParseIndex(name)
	return ok && Wanted(outputs, subtask, consumer, j)
}

// Keep is the decision for one entry of an output directory, as the
// producer left it: at depth 1 (consumer is "") an entry named name of type
// mode is kept if it is the directory of a consumer vertex; at depth 2 (in
// the directory of consumer) if it is a regular file that Counts. Every
// other entry is removed when the output becomes a partition.
func Keep(outputs []wire.Output, subtask int, consumer, name string, mode fs.FileMode) bool {
	if consumer == "" {
		_, ok := output(outputs, name)
		return ok && mode.IsDir()
	}
	return mode.IsRegular() && Counts(outputs, subtask, consumer, name)
}

// ParseIndex parses a canonical non-negative decimal below MaxParallelism
// (no sign, no leading zeros), so that one index has one file name.
func ParseIndex(s string) (int, bool) {
	if s == "" || len(s) > len(strconv.Itoa(MaxParallelism)) {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= MaxParallelism || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// CheckLoaded is the decision on a partition found on disk when the
// executor starts: it is served again only if its metadata names the
// directory it is in (id) and the data it holds still has the size the
// metadata says (bytes, the sum of the files that count). Otherwise it is
// deleted and, not being reported, is lost to the leader.
func CheckLoaded(m Meta, id string, bytes int64) (ok bool, why string) {
	switch {
	case m.ID != id:
		return false, "its metadata names " + strconv.Quote(m.ID)
	case wire.ExecutionID(m.JobID, m.Vertex, m.Subtask, m.Attempt) != id:
		return false, "its metadata does not match its execution id"
	case m.Bytes != bytes:
		return false, "it holds " + strconv.FormatInt(bytes, 10) + " bytes, its metadata says " + strconv.FormatInt(m.Bytes, 10)
	}
	return true, ""
}

// KeepOutput is the fate of a producer's output when its execution ends in
// state: only a FINISHED producer leaves a partition; the output of one that
// FAILED or was CANCELED is deleted.
func KeepOutput(state wire.State) bool { return state == wire.StateFinished }
