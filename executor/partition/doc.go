// Package partition is an executor's data plane: it keeps the outputs of
// finished producer tasks (partitions), serves their bytes to the
// executors of their consumers, and fetches and feeds the inputs of its own
// consumer tasks.
//
// # Vocabulary
//
//   - Producer: a task whose vertex has consumers (it has outputs). It
//     writes into its output directory one directory per consumer vertex C,
//     and in it the file C/<j> for subtask j of C (Counts is the rule).
//   - Consumer: a task whose vertex has inputs. It reads, per producer
//     vertex P, the entries P/<i> of its input directory: what subtask i of
//     P wrote for it.
//   - Partition: the output of one FINISHED producer execution, named by
//     the execution's id, kept on its executor's disk (Store) until a
//     leader releases it. Its size is the sum of the files that count.
//   - Live producer: a producer that runs; its pipelined outputs are
//     streamed to consumers as they grow.
//   - Blocking input: regular files, fetched whole before the consumer
//     starts. Pipelined input: named pipes, fed while the producer runs,
//     through a spool file on disk (Spool).
//   - Fetch: one consumer subtask's bytes of one producer execution, read
//     from the executor that holds them, resumed at the offset reached when
//     a connection breaks, retried with backoff (Retry) up to a bound.
//   - End marker: the trailer that says how a stream ended (complete, or
//     failed: the producer did not finish). A stream without it is
//     incomplete and is fetched again from where it stopped.
//
// The decisions are pure functions: which files count (Counts, Keep,
// Wanted), whether a partition found on disk is whole (CheckLoaded), the
// fate of an output (KeepOutput), the retry schedule (Backoff, Retry). The
// rest moves bytes: a chunk (64 KiB) at a time, never a whole partition in
// memory.
package partition
