// Package fsm is jobmaster's replicated state machine: the jobs, the
// executions (the expected-deployment set) and the leader epoch, changed only
// by commands committed through Raft.
//
// Vocabulary:
//
//   - job: a submitted spec (see package jobspec) with its status and restart
//     bookkeeping.
//   - subtask: one parallel instance of a vertex, numbered from 0.
//   - attempt: the n-th try of a subtask, numbered from 0. A restart creates
//     attempt n+1 only once attempt n is terminal, so at most one attempt of a
//     subtask is alive.
//   - execution: one attempt, with id <job>/<vertex>/<subtask>/<attempt>,
//     the executor and slot it was placed on, its state, and the epoch that
//     deployed it.
//   - pending / deployed: a placed execution is pending until its executor
//     acknowledges the deployment (by answering the deploy or reporting it),
//     then deployed. Only deployed executions can be missing.
//   - region: a pipelined region of the job graph (jobspec.Region); the unit
//     of scheduling and of region failover.
//   - slot: a numbered place on an executor. Subtask i of every vertex in one
//     slot sharing group of a job shares a slot.
//   - epoch (fencing token): the log index of the latest
//     establish-leadership command. Leader commands carry the token of their
//     leader; one older than the epoch changes nothing.
//
// The state is deterministic: commands carry the time at which the leader
// proposed them, nothing reads a clock, draws randomness or depends on map
// iteration order, so every master that applies the same log reaches the
// same state and the same Hash.
//
// Command encoding: one type byte, a uvarint length and a go-msgpack/v2 body;
// a Raft entry holds one or more such frames. Type numbers are append-only.
package fsm
