// Package integration starts the real jobmaster binary as separate processes
// (masters and executors on loopback, or each in its own network namespace)
// and kills, pauses, freezes, cuts off and restarts them, checking the
// safety properties of docs/architecture.md from the outside: through the
// HTTP API, the executors' reports, the processes left on the machine, and
// the history the tasks write.
//
// The binary is built once per test run with -race (or taken from
// JOBMASTER_BIN).
//
// Files:
//   - The harness: cluster.go (a cluster's options, its nodes' addresses
//     and command lines, start and close), node.go (one node's process:
//     start, kill, pause, freeze, restart), api.go (reads, submits and waits
//     through the HTTP API), logdump.go (the nodes' logs printed when a
//     test fails) and proc.go (the processes /proc shows).
//   - netns.go: one network namespace per node behind a router namespace;
//     silent partitions between chosen pairs of nodes.
//   - lifecycle_test.go: scenario tests of the deployment lifecycle.
//   - The chaos suite, Jepsen-style: workload.go (clients submitting,
//     retrying and cancelling jobs whose tasks write history.go's records),
//     nemesis.go (the fault kinds and the seeded schedule), chaos.go (one
//     run: cluster, workload, nemesis, healing, gathering the final state),
//     checker.go (the pure history checker, unit-tested in
//     checker_test.go), checker_replicas.go (the masters' states compared
//     at equal applied indexes: BEHIND or APART), chaos_replicas.go (the
//     hash readings during and after the run), report.go (the table a run
//     prints and writes), replaykit.go (replay.json: seed, faults with
//     times, workload, commit, load) and logscan.go (races, panics and
//     fatal errors in the nodes' logs, and the product bugs already
//     reported).
//   - explain_test.go: a failed run's masters' Raft logs replayed, to
//     tell a diverged log from a state that is not its own log's.
//   - raftcommit_test.go: the Raft commit hazard behind issue 16, and the
//     guard proposed against it.
//   - ui_test.go: the web UI driven in a headless Chromium (browser.go:
//     finding and starting it; skipped without one unless
//     JOBMASTER_REQUIRE_BROWSER=1); ui_screenshots_test.go writes the
//     docs' screenshots (make screenshots).
//   - bugs_test.go: minimal reproductions of product bugs the suite found,
//     kept as regression tests.
//
// Running: `go test ./integration/` runs the lifecycle tests and TestChaos
// (fixed seeds, -chaos.seeds, each fault kind once); `make chaos
// DURATION=10m SEED=42` runs TestChaosSoak and prints its report. Network
// namespaces need root and iproute2; without them the nodes run on
// loopback and the partition faults are skipped (the report says so).
package integration
