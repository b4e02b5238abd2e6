// Package jobspec defines the job specification that users submit, its
// validation, and the static structure derived from it: the pipelined regions
// of the job graph and the blocking dependencies between them.
//
// Vocabulary:
//
//   - vertex: one operator of the job graph, run as Parallelism parallel
//     subtasks, each a process started from Command.
//   - edge: an input of a vertex. A pipelined edge means producer and consumer
//     run at the same time; a blocking edge means the consumer starts only when
//     every subtask of the producer has FINISHED.
//   - region (pipelined region): a set of vertices connected by pipelined
//     edges. A region is scheduled all or nothing and, under the default
//     failover scope, restarted as a unit.
//   - slot sharing group: subtask i of every vertex in the same group shares
//     one executor slot.
//
// Everything here is pure: parsing and validation take bytes and return a
// normalized Spec or an error naming the offending field.
package jobspec
