package executor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// serveLogs answers GET /v1/executions/logs?id=<execution id>&stream=
// stdout|stderr[&tail=N]: the task's captured output (its last N bytes with
// tail) as text/plain. The id is validated before it names a file, and the
// log file is never followed through a symbolic link.
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
	f, err := os.OpenFile(filepath.Join(executionDir(e.cfg.DataDir, id), stream+".log"), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		e.mu.Lock()
		_, held := e.held.get(id)
		e.mu.Unlock()
		if held { // a task without captured output (the sim runtime)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusOK)
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no logs for execution %s", id))
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("open %s log of %s: %v", stream, id, err))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("%s log of %s is not a regular file", stream, id))
		return
	}
	size, off := fi.Size(), int64(0)
	if tail >= 0 && tail < size {
		off = size - tail
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.FormatInt(size-off, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, io.NewSectionReader(f, off, size-off))
}
