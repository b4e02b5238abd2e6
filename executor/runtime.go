package executor

import (
	"errors"

	"jobmaster/wire"
)

// errRuntimeClosed is the start error of a task deployed while the executor
// stops.
var errRuntimeClosed = errors.New("executor is stopping")

// runtime runs tasks. It reports every task's end through the exit callback
// it was built with, once per started task, never while holding a lock of
// its own, and never from within start. The executor never calls a runtime
// while holding its own lock.
type runtime interface {
	// start starts t; an error means the task did not start.
	start(t wire.Task) error
	// stop asks a task to stop gracefully (SIGTERM, SIGKILL after the
	// grace period). Unknown or ended tasks are ignored.
	stop(id string)
	// kill stops a task at once.
	kill(id string)
	// close kills every task still running, waits for the runtime's
	// goroutines to end, and makes later starts fail. Idempotent.
	close()
}
