// Package integration starts the real jobmaster binary as separate processes
// (masters and executors on loopback) and kills, pauses, freezes and
// restarts them, checking the safety properties of docs/architecture.md
// from the outside: through the HTTP API, the executors' reports, the
// processes left on the machine, and the history the tasks write.
//
// The binary is built once per test run (or taken from JOBMASTER_BIN).
package integration
