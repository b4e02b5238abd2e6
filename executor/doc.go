// Package executor is an executor node of jobmaster: it offers slots, runs
// the tasks that the leader deploys onto it, reports what it holds, and
// fences itself off from leaders that are no longer the newest.
//
// # Vocabulary
//
//   - Execution: one run of one subtask of a job vertex, named by its
//     execution id "<job>/<vertex>/<subtask>/<attempt>" (every component made
//     of [A-Za-z0-9._-], never "." or ".."; subtask and attempt are 0-based
//     decimal numbers). Each execution gets a working directory
//     DataDir/executions/<execution id>/ holding its stdout.log and
//     stderr.log, which its shim writes and rotates (logrotate.go).
//   - Attempt: the number of times the subtask was started before this
//     execution. A restarted subtask is a new execution with a new id: an
//     executor never restarts anything by itself.
//   - Slot: the unit of capacity the executor offers (Config.Slots). The
//     leader places every task in a slot; tasks of one slot sharing group
//     may share a slot. Used slots are the distinct slots of live executions.
//   - Live / terminal: an execution is live while DEPLOYING (being started),
//     RUNNING or CANCELING, and terminal once FINISHED, FAILED or CANCELED.
//   - Held set: every execution the executor holds: each live one and each
//     terminal one not yet acknowledged. Every report lists the held set.
//   - Acknowledged: a terminal execution whose state the leader has recorded
//     (it lists it in a heartbeat's Ack or in the answer to a push). The
//     executor forgets it then, and only then: a terminal state is never
//     dropped without an acknowledgment, so no state change is lost across a
//     failover of the masters (it is lost only if the executor process dies).
//   - Fencing token: the log index of a leader's establish-leadership entry;
//     newer leaders have larger tokens. Every leader request carries one and
//     its cluster's id. The executor acts only on requests whose token is at
//     least the newest it has seen from that cluster, stores a newer token
//     durably under DataDir before acting on it, and answers an older one
//     with 409 and the newest token. A new cluster (formed afresh, or
//     restored from a snapshot) replaces the old one for good (token.go).
//   - Lease: the executor's self-fencing timer, renewed by every heartbeat
//     that is not a probe (deploys and cancels do not renew it). Every task
//     is dead within Config.Lease of the last renewal: the executor starts
//     stopping its tasks cancel-grace (+0.5 s) before the lease runs out
//     (they end CANCELED, "lease expiring: ..."), and each task's shim does
//     the same from the lease file if the executor cannot (leasefile.go).
//     The master's executor timeout is longer than the lease, so by the time
//     a leader restarts the tasks of an executor it lost, that executor has
//     stopped them.
//   - Runtime: how tasks run. "exec" runs every task as a real process under
//     a shim (see RunShim) in its own process group; "sim" runs no process
//     and ends every task after Env["SIM_DURATION"] with exit code
//     Env["SIM_EXIT_CODE"], for tests and benchmarks. A sim producer leaves
//     an empty partition (0 bytes, kept in memory only: a restarted sim
//     executor has none); a sim consumer fetches nothing unless
//     Env["SIM_FETCH"] is true.
//   - Task cgroups: under the exec runtime, each task runs in cgroups of
//     its own (v2, or v1 on a hybrid host), capped at the resources it
//     declared (wire.Resources) and Config.TaskPidsMax processes; it joins
//     them before it runs its own code. One the OOM killer killed in ends
//     FAILED "out of memory: ..." (cgroup.go decides, cgroup_io.go does).
//   - Push: every state change is sent at once to the newest leader's address
//     (Report with Partial set); heartbeats answer with the full report.
//   - Producer, consumer, partition: a task with outputs writes, in its
//     JOBMASTER_OUTPUT_DIR, C/<j> for subtask j of each consumer vertex C;
//     when it FINISHED, that output is a partition, named by its execution
//     id, kept under DataDir/partitions/ after the execution is
//     acknowledged and forgotten, until a leader releases it. A task with
//     inputs reads, in its JOBMASTER_INPUT_DIR, P/<i> for subtask i of each
//     producer vertex P: files fetched before it starts (blocking), or named
//     pipes fed while the producer runs (pipelined). Package partition holds
//     the rules (which files count) and moves the bytes; dataplane.go
//     carries them out for the executor.
//   - Fetch: the consumer's executor reads a source's bytes from the
//     producer's executor (wire.PathPartitionData), carrying its own fence,
//     resuming where a broken fetch stopped, retrying with backoff for up to
//     Config.FetchTimeout; then the consumer FAILS, naming the producers it
//     could not fetch (Unavailable).
//
// # Structure
//
// The decisions are plain code without I/O or clocks: the held set and its
// transitions (held.go), the fencing-token check (token.go), the lease
// (lease.go), execution id validation (ids.go), the cgroup layout, limits
// and out-of-memory verdict (cgroup.go), the bounds on edges and
// fetches (edges.go), and in package partition which files count, when a
// partition is whole and the retry schedule. The rest carries their
// results out. Goroutines: the HTTP server's (a fetch's handler streams as
// long as its producer runs); the lease loop, which checks the lease every
// Lease/20; the pusher, the only goroutine that sends pushes; the
// collector (gcloop.go), the only one that deletes execution directories,
// as gcPlan (gc.go) decides; tidy, the only
// one that carries out the data plane's share of an execution's end
// (deleting inputs, discarding outputs); the sim runtime's timer loop (one
// per executor, however many tasks); for the exec runtime, one waiter per
// task process; and for the data plane, one per task that must fetch before
// it starts, and two per pipelined source (its fetch and its feeder). None
// of them holds the executor's lock while doing I/O, except that a newer
// fencing token is written to disk before the request carrying it is acted
// on.
package executor
