// Package leader holds what the leader decides: per executor report, per
// tick, per scheduling pass. It is the pure core of the leader's duties
// (docs/architecture.md); package master feeds it and carries out what it
// returns, and the scenario tests drive the same core.
//
// Inputs are the replicated state (read through a Reader), what gossip says
// of executors (Member), what an executor answered (wire.Report) and the
// time, always passed in. Outputs are a Ready: the commands to propose, the
// requests to send and what to log. Nothing here does I/O, reads a clock or
// starts a goroutine.
//
// # Vocabulary
//
//   - session: one term of leadership, from the commit of the epoch (its
//     index is the fencing token) until leadership is lost. A Core lives for
//     one session: a new leader builds a new one from the state and gossip,
//     so it adopts what runs instead of restarting it.
//   - executor table: the leader's memory of every executor it knows, from
//     gossip or because the state has work placed on it: its address, slots,
//     lease, when it last answered, its liveness. Not replicated.
//   - liveness: alive (answered within two heartbeat intervals), suspect
//     (silent for longer), lost (silent for the executor timeout: its
//     executions are failed, executor-lost). A new session counts every
//     executor alive from its start.
//   - answered: the executor answered a heartbeat of this session; only then
//     is it given new work.
//   - wave: every heartbeat interval the leader heartbeats every executor at
//     once (package master); each heartbeat carries the acks queued for the
//     executor.
//   - probe: a heartbeat that does not renew the executor's lease, sent once
//     the executor has been silent for so long that a renewed lease could
//     outlast the moment it is declared lost (Core.Heartbeat).
//   - report: an executor's account of what it holds. A full report answers
//     a heartbeat; a partial one (a push, or the answer to a deploy) names
//     only some executions, so nothing can be missing from it.
//   - ack: a terminal execution whose state is recorded, which the executor
//     may forget.
//   - kick: wake the scheduler at once, because slots may have been freed or
//     an executor came back.
//   - outbox: the deployments waiting for their executor's answer to the
//     one in flight there, sent together once it is in (Outbox).
//   - unknown, missing, expired, redeploy: the reconciler's verdicts
//     (package reconcile).
//
// # Carrying out a Ready
//
// Every decision returns a Ready. The caller (package master, or the
// scenario harness) carries it out in this order:
//
//  0. log Changes (liveness changes: they are the cause of what follows);
//  1. propose Propose, in one batch, under the session's token;
//  2. on success pass the results to Core.Committed, which adds what
//     follows from them (deploys of the executions placed, acks of the
//     terminal states recorded, executors marked lost, a kick); on failure
//     keep only Failed(ready): a later report or tick decides again;
//  3. log Events, kick the scheduler if Kick, send Cancel and Deploy, and
//     hand Ack to the executor (with its next heartbeat, or in the answer to
//     its push).
//
// A Core is safe for concurrent use: package master calls it from one
// goroutine per executor and from the session's loops.
package leader
