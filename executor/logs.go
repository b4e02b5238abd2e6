package executor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"jobmaster/wire"
)

// serveLogs answers GET /v1/executions/logs?id=<execution id>&stream=
// stdout|stderr[&tail=N][&follow=1]: the task's captured output (its last N
// bytes with tail) as text/plain. The id is validated before it names a
// file, and the log file is never followed through a symbolic link. With
// follow, the answer goes on with what the task writes until it has ended
// (followLog).
func (e *Executor) serveLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("id")
	if id == "" {
		writeError(w, http.StatusBadRequest, "missing query parameter id (an execution id)")
		return
	}
	if err := validateExecutionID(id); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	stream := q.Get("stream")
	switch stream {
	case "":
		stream = "stdout"
	case "stdout", "stderr":
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("stream %q: want stdout or stderr", stream))
		return
	}
	tail := int64(-1)
	if s := q.Get("tail"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("tail %q: want a non-negative number of bytes", s))
			return
		}
		tail = n
	}
	follow := false
	switch q.Get("follow") {
	case "", "0":
	case "1":
		follow = true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("follow %q: want 0 or 1", q.Get("follow")))
		return
	}
	path := filepath.Join(executionDir(e.cfg.DataDir, id), stream+".log")
	parts, err := openLog(path, e.cfg.TaskLogMaxFiles)
	if errors.Is(err, fs.ErrNotExist) {
		e.mu.Lock()
		_, held := e.held.get(id)
		e.mu.Unlock()
		if held { // not started yet, or without captured output (the sim runtime)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if follow {
				w.Header().Set("Trailer", wire.HeaderEnd)
			} else {
				// A read at once always says its length: a master relays
				// only an answer whose end it can check.
				w.Header().Set("Content-Length", "0")
			}
			w.WriteHeader(http.StatusOK)
			if follow {
				if e.cfg.Runtime == RuntimeSim {
					path = "" // it never writes one
				}
				e.followLog(w, r, id, nil, path)
			}
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no logs for execution %s", id))
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("%s log of %s: %v", stream, id, err))
		return
	}
	defer parts.close()
	size := parts.size()
	off := int64(0)
	if tail >= 0 && tail < size {
		off = size - tail
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if follow {
		w.Header().Set("Trailer", wire.HeaderEnd)
		w.WriteHeader(http.StatusOK)
		if _, err := io.Copy(w, parts.reader(off)); err != nil {
			return
		}
		e.followLog(w, r, id, parts.cursor(), "")
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(size-off, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, parts.reader(off))
}

// followPoll is how often a followed log is read for more.
const followPoll = 200 * time.Millisecond

// followLog copies the log at cur as it grows, across its rotations,
// until execution id has ended (or is no longer held) and everything it
// wrote is sent; the trailer then says the log is complete. A task's
// output is complete once it has ended: its process has exited before its
// end is recorded. It stops early, without the trailer, when the client
// goes or the executor stops. cur nil: the task has no log file yet; if
// path is set, it is opened once it appears (the task had not started when
// the follow began), else only the task's end is awaited (sim).
func (e *Executor) followLog(w http.ResponseWriter, r *http.Request, id string, cur *logCursor, path string) {
	rc := http.NewResponseController(w)
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	defer func() {
		if cur != nil {
			cur.close()
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		e.mu.Lock()
		st, held := e.held.get(id)
		ended := !held || st.State.Terminal()
		settled, running := e.settled, e.phase == phaseRunning
		e.mu.Unlock()
		if cur == nil && path != "" {
			if parts, err := openLog(path, e.cfg.TaskLogMaxFiles); err == nil {
				_, err := io.Copy(w, parts.reader(0))
				cur = parts.cursor()
				parts.close()
				if err != nil {
					return
				}
			}
		}
		if cur != nil { // what is there now, in this file and the newer ones
			if err := cur.copyTo(w, buf); err != nil {
				return
			}
		}
		if ended {
			w.Header().Set(wire.HeaderEnd, wire.EndComplete)
			return
		}
		if err := rc.Flush(); err != nil || !running {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-e.quit:
			return
		case <-settled:
		case <-tick.C:
		}
	}
}
