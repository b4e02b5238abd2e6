package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"jobmaster/executor/partition"
	"jobmaster/internal/forceremove"
	"jobmaster/wire"
)

// The data plane of an executor (package partition does the moving of
// bytes). An exec task's execution directory holds, besides its logs:
//
//	output/<C>/       the task's JOBMASTER_OUTPUT_DIR: one directory per consumer vertex C
//	input/<P>/<i>     its JOBMASTER_INPUT_DIR: a file (blocking) or named pipe (pipelined) per source
//	spool/<P>/<i>     what a pipelined source brought and the task has not read yet
//
// When a producer FINISHED, output/ moves to <data-dir>/partitions/
// (partition.Store); input/ and spool/ are deleted when the task ends,
// whatever its end, and output/ too unless it FINISHED.
const (
	outputDir = "output"
	inputDir  = "input"
	spoolDir  = "spool"
	// partitionsDir is the store's directory under the data directory.
	partitionsDir = "partitions"
	// fetchWorkers bounds the blocking inputs of one task fetched at once.
	fetchWorkers = 8
)

// SimFetchEnv, set to a true value (strconv.ParseBool) in a sim task's
// environment, makes the executor fetch the task's inputs before its
// simulated run (discarding the bytes), as it does for an exec task: its
// sources must be available, and it fails as an exec task would if they
// are not. Without it a sim consumer reads nothing, which costs nothing.
const SimFetchEnv = "SIM_FETCH"

// dataTask is the data plane's share of an execution with outputs or
// inputs, from its deploy until its end has been carried out (tidy).
type dataTask struct {
	task wire.Task
	// ctx is the life of the consumer's streams; it ends (tidy) once the
	// task has ended, so no pipe is closed under a live task.
	ctx    context.Context
	cancel context.CancelFunc
	// prep bounds the blocking fetches: it ends early when the execution
	// is cancelled before it started.
	prep       context.Context
	prepCancel context.CancelFunc
	wg         sync.WaitGroup // its fetches and feeders
	// Set while it is prepared (before it starts), read after it ended.
	produces bool               // registered with the store
	spools   []*partition.Spool // guarded by the executor's mu
	// ending: its end is queued for tidy (guarded by the executor's mu).
	ending bool
}

// hasData reports whether t's execution needs the data plane.
func hasData(t wire.Task) bool { return len(t.Outputs) > 0 || len(t.Inputs) > 0 }

// startsLater reports whether t's start must wait for fetches, which the
// deploy request does not wait for: an exec task with a blocking input,
// and a sim task that fetches (SimFetchEnv).
func (e *Executor) startsLater(t wire.Task) bool {
	if e.cfg.Runtime == RuntimeSim {
		return len(t.Inputs) > 0 && simFetches(t.Env)
	}
	for _, in := range t.Inputs {
		if in.Mode == wire.ModeBlocking {
			return true
		}
	}
	return false
}

// simFetches reports whether a sim task's environment asks it to fetch.
func simFetches(env map[string]string) bool {
	b, err := strconv.ParseBool(env[SimFetchEnv])
	return err == nil && b
}

func (e *Executor) newDataTask(t wire.Task) *dataTask {
	dt := &dataTask{task: t}
	dt.ctx, dt.cancel = context.WithCancel(e.dataCtx)
	dt.prep, dt.prepCancel = context.WithCancel(dt.ctx)
	return dt
}

// goData runs f as a data-plane goroutine counted in wg and in the
// executor's: never once Crash or Shutdown waits for them (phase).
func (e *Executor) goData(wg *sync.WaitGroup, f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.phase == phaseStopped {
		return false
	}
	e.dataWG.Add(1)
	if wg != nil {
		wg.Add(1)
	}
	go func() {
		defer e.dataWG.Done()
		if wg != nil {
			defer wg.Done()
		}
		f()
	}()
	return true
}

// taskDirs are the data-plane directories of an execution.
func taskDirs(dataDir, id string) (out, in, spool string) {
	dir := executionDir(dataDir, id)
	return filepath.Join(dir, outputDir), filepath.Join(dir, inputDir), filepath.Join(dir, spoolDir)
}

// metaOf is what the store keeps of producer t.
func metaOf(t wire.Task) partition.Meta {
	return partition.Meta{ID: t.ExecutionID, JobID: t.JobID, Vertex: t.Vertex, Subtask: t.Subtask, Attempt: t.Attempt, Outputs: t.Outputs}
}

// prepare makes what task dt needs before its process starts: its output
// directory (registered with the store, so that its pipelined outputs can
// be streamed from the start), its blocking inputs fetched whole, its
// pipelined inputs' pipes with their fetches and feeders running. An error
// means the task must not start.
func (e *Executor) prepare(dt *dataTask) error {
	t := dt.task
	if e.cfg.Runtime == RuntimeSim {
		if len(t.Outputs) > 0 {
			e.store.Begin(metaOf(t), "")
			dt.produces = true
		}
		if len(t.Inputs) > 0 && simFetches(t.Env) {
			return e.fetchAll(dt, nil, "")
		}
		return nil
	}
	out, in, spool := taskDirs(e.cfg.DataDir, t.ExecutionID)
	for _, d := range []string{out, in, spool} { // left by an earlier run of a reused id
		if err := forceremove.All(d); err != nil {
			return e.localError("clearing the execution directory", err)
		}
	}
	mk := func(d string) error {
		e.dirMu.Lock()
		err := os.MkdirAll(d, 0o700)
		e.dirMu.Unlock()
		if err != nil {
			return e.localError("creating the execution directory", err)
		}
		return nil
	}
	if len(t.Outputs) > 0 {
		for _, o := range t.Outputs {
			if err := mk(filepath.Join(out, o.Vertex)); err != nil {
				return err
			}
		}
		e.store.Begin(metaOf(t), out)
		dt.produces = true
	}
	if len(t.Inputs) == 0 {
		return nil
	}
	for _, inp := range t.Inputs {
		if err := mk(filepath.Join(in, inp.Vertex)); err != nil {
			return err
		}
	}
	if err := e.fetchAll(dt, func(inp wire.Input) bool { return inp.Mode == wire.ModeBlocking }, in); err != nil {
		return err
	}
	return e.streamPipelined(dt, in, spool)
}

// source is one source a task reads, with the input it belongs to.
type source struct {
	in  wire.Input
	src wire.Source
}

func (s source) String() string { return s.in.Vertex + "/" + strconv.Itoa(s.src.Subtask) }

// sources lists what t reads from the inputs that pick selects (all if
// nil).
func sources(t wire.Task, pick func(wire.Input) bool) []source {
	var out []source
	for _, in := range t.Inputs {
		if pick != nil && !pick(in) {
			continue
		}
		srcs, _ := readsFrom(in, t.Subtask)
		for _, s := range srcs {
			out = append(out, source{in, s})
		}
	}
	return out
}

func (e *Executor) fetchSource(t wire.Task, s source) partition.Source {
	return partition.Source{Addr: s.src.Addr, Executor: s.src.Executor, Producer: s.src.Execution, Consumer: t.Vertex, Index: t.Subtask,
		Follow: s.in.Mode == wire.ModePipelined}
}

// fetchAll fetches the sources of the inputs that pick selects, at most
// fetchWorkers at once, each into in/<P>/<i> (or, with in "", nowhere: a
// sim task's). It returns an *inputError naming every source that failed.
func (e *Executor) fetchAll(dt *dataTask, pick func(wire.Input) bool, in string) error {
	srcs := sources(dt.task, pick)
	if len(srcs) == 0 {
		return nil
	}
	work := make(chan source)
	var mu sync.Mutex
	var failed []sourceFailure
	var wg sync.WaitGroup
	for range min(fetchWorkers, len(srcs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				if err := e.fetchOne(dt, s, in); err != nil && dt.prep.Err() == nil {
					mu.Lock()
					failed = append(failed, sourceFailure{s, err})
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for _, s := range srcs {
		select {
		case work <- s:
		case <-dt.prep.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := dt.prep.Err(); err != nil {
		return errCanceledBeforeStart
	}
	return e.inputFailure(failed)
}

// The start errors of a task stopped while it was prepared; its state
// gives the reason (the cancel's message, or the input that broke).
var (
	errCanceledBeforeStart = errors.New("canceled before it started")
	errStoppedBeforeStart  = errors.New("stopped before it started")
)

// fetchOne fetches one source into its file under in ("" discards it).
func (e *Executor) fetchOne(dt *dataTask, s source, in string) error {
	if in == "" {
		return e.fetcher.Fetch(dt.prep, e.fetchSource(dt.task, s), discard{})
	}
	f, err := os.OpenFile(filepath.Join(in, s.in.Vertex, strconv.Itoa(s.src.Subtask)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return &partition.SinkError{Err: err}
	}
	err = e.fetcher.Fetch(dt.prep, e.fetchSource(dt.task, s), f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = &partition.SinkError{Err: cerr}
	}
	return err
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// streamPipelined makes a named pipe per pipelined source and starts its
// fetch (into the spool) and its feeder (spool into pipe), which run until
// the consumer ends. A source that fails fails the task (failInput).
func (e *Executor) streamPipelined(dt *dataTask, in, spool string) error {
	srcs := sources(dt.task, func(inp wire.Input) bool { return inp.Mode == wire.ModePipelined })
	if len(srcs) == 0 {
		return nil
	}
	nudge := partition.NewNudge()
	for _, s := range srcs {
		name := strconv.Itoa(s.src.Subtask)
		if err := os.MkdirAll(filepath.Join(spool, s.in.Vertex), 0o700); err != nil {
			return e.localError("creating the spool", err)
		}
		fifo := filepath.Join(in, s.in.Vertex, name)
		if err := mkfifo(fifo); err != nil {
			return e.localError("creating the input pipe "+s.String(), err)
		}
		sp, err := partition.CreateSpool(filepath.Join(spool, s.in.Vertex, name))
		if err != nil {
			return e.localError("creating the spool of "+s.String(), err)
		}
		e.mu.Lock()
		dt.spools = append(dt.spools, sp)
		e.mu.Unlock()
		// The fetch also stops when the task closes its pipe: it chose to
		// read no more, and the bytes would only fill the disk.
		fctx, stopFetch := context.WithCancel(dt.ctx)
		e.goData(&dt.wg, func() {
			switch sp.Feed(dt.ctx, fifo, nudge) {
			case partition.ReaderGone:
				stopFetch()
			case partition.Unreadable:
				if dt.ctx.Err() == nil {
					// The bytes fetched cannot reach the task: it would
					// wait on its pipe for good.
					e.failInput(dt.task.ExecutionID, &inputError{msg: e.localError("reading the spool of input "+s.String(), sp.ReadErr()).Error()})
				}
			}
		})
		e.goData(&dt.wg, func() {
			defer stopFetch()
			err := e.fetcher.Fetch(fctx, e.fetchSource(dt.task, s), sp)
			sp.End(err)
			if err != nil && fctx.Err() == nil {
				ie := e.inputFailure([]sourceFailure{{s, err}}).(*inputError)
				e.failInput(dt.task.ExecutionID, ie)
			}
		})
	}
	return nil
}

// failInput stops a task whose input broke: it ends FAILED with ie.
func (e *Executor) failInput(id string, ie *inputError) {
	e.mu.Lock()
	stop := e.held.fail(id, ie.msg, ie.unavailable)
	e.mu.Unlock()
	e.log.Warn("an input broke: stopping the task", "execution", id, "err", ie.msg)
	if stop {
		e.rt.stop(id)
	}
}

// endedLocked queues the data plane's share of execution id, which has
// just ended in state, for tidy.
func (e *Executor) endedLocked(id string, state wire.State) {
	dt := e.data[id]
	if dt == nil || dt.ending {
		return
	}
	dt.ending = true
	e.ended = append(e.ended, endedTask{dt, state})
	select {
	case e.tidyKick <- struct{}{}:
	default:
	}
}

type endedTask struct {
	dt    *dataTask
	state wire.State
}

// tidyLoop carries out the ends of data tasks, one after another, off the
// executor's lock: it is the one goroutine that deletes inputs and
// discards outputs. At Shutdown it finishes its queue; after a Crash it
// leaves it (a new executor's sweep cleans up).
func (e *Executor) tidyLoop() {
	defer e.loops.Done()
	for {
		select {
		case <-e.quit:
			e.tidyAll()
			return
		case <-e.tidyKick:
			e.tidyAll()
		}
	}
}

func (e *Executor) tidyAll() {
	for {
		e.mu.Lock()
		items := e.ended
		e.ended = nil
		crashed := e.phase == phaseStopped
		e.mu.Unlock()
		if len(items) == 0 || crashed {
			return
		}
		for _, it := range items {
			e.tidy(it)
		}
	}
}

// tidy carries out the end of a data task: a producer that did not FINISH
// leaves nothing (partition.KeepOutput); a consumer's streams stop (its
// task is gone) and its inputs and spool are deleted.
func (e *Executor) tidy(it endedTask) {
	dt, id := it.dt, it.dt.task.ExecutionID
	if dt.produces && !partition.KeepOutput(it.state) {
		e.store.Discard(id)
	}
	dt.cancel()
	dt.wg.Wait()
	e.mu.Lock()
	spools := dt.spools
	e.mu.Unlock()
	for _, sp := range spools {
		_ = sp.Close()
	}
	if e.cfg.Runtime == RuntimeExec {
		out, in, spool := taskDirs(e.cfg.DataDir, id)
		for _, d := range []string{out, in, spool} {
			if err := forceremove.All(d); err != nil {
				e.log.Warn("deleting the data of an execution that ended", "execution", id, "dir", d, "err", err)
			}
		}
	}
	e.mu.Lock()
	if e.data[id] == dt {
		delete(e.data, id)
	}
	e.mu.Unlock()
}

// sourceFailure is one source that could not be read.
type sourceFailure struct {
	s   source
	err error
}

// inputError is a consumer's failure to read its inputs: the message of
// its FAILED state and the producer executions it could not fetch.
type inputError struct {
	msg         string
	unavailable []string
}

func (ie *inputError) Error() string         { return ie.msg }
func (ie *inputError) Unavailable() []string { return ie.unavailable }

// maxListed bounds how many failed sources a message names.
const maxListed = 3

// inputFailure describes failed sources (nil if none): each by its input
// and subtask, its producer execution and executor, and what went wrong;
// the producers whose partitions could not be fetched are unavailable (a
// producer that failed, or a full local disk, is not the partition's
// fault).
func (e *Executor) inputFailure(failed []sourceFailure) error {
	if len(failed) == 0 {
		return nil
	}
	ie := &inputError{}
	var parts []string
	for _, f := range failed {
		what := fmt.Sprintf("input %s (execution %s on executor %s)", f.s, f.s.src.Execution, f.s.src.Executor)
		var un *partition.UnavailableError
		var sink *partition.SinkError
		switch {
		case errors.As(f.err, &un):
			ie.unavailable = append(ie.unavailable, f.s.src.Execution)
			what += " unavailable: " + f.err.Error()
		case errors.Is(f.err, partition.ErrProducerFailed):
			what += " failed: " + f.err.Error()
		case errors.As(f.err, &sink):
			what += ": " + e.withDiskNote(f.err)
		default:
			what += ": " + f.err.Error()
		}
		if len(parts) < maxListed {
			parts = append(parts, what)
		}
	}
	if n := len(failed) - len(parts); n > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", n))
	}
	ie.msg = strings.Join(parts, "; ")
	slices.Sort(ie.unavailable)
	return ie
}
