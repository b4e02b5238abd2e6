package api

// A task's log read through a master: GET /v1/jobs/{id}/logs (docs/api.md,
// "GET /v1/jobs/{id}/logs"). The answer is the log as text/plain.

// LogExecutorHeader names, on the answer of a log read through a master,
// the executor the log was read from.
const LogExecutorHeader = "X-Jobmaster-Executor"

// LogTailDefault is the tail a log read through a master gets when it asks
// for none: the last 1 MiB of the log, what the web UI shows.
const LogTailDefault = 1 << 20

// LogTailMax is the most a log read through a master may ask for (tail=N):
// a master relays logs to read, not to move; a whole log of any size is the
// executor's own endpoint's (jobmaster job logs).
const LogTailMax = 16 << 20
