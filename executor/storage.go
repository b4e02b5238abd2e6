package executor

import (
	"sort"
	"strings"

	"jobmaster/wire"
)

// The executor's own files, whose write failures it reports (the values
// of the file label of storage_write_failures_total).
const (
	fileLease = "lease" // the lease file the shims read
	fileToken = "token" // the fencing token
)

// fileNames names the files in a report's storage error.
var fileNames = map[string]string{fileLease: "lease file", fileToken: "fencing token"}

// maxStorageError bounds the length of the storage error a report carries.
const maxStorageError = wire.MaxStorageError

// storageFailedLocked records a failed write of file: counted, and kept
// in every report (and so in the leader's cluster view) until a write of
// that file succeeds. The caller logs it.
func (e *Executor) storageFailedLocked(file string, err error) {
	e.metrics.writeFails.WithLabelValues(file).Inc()
	if e.storageErr == nil {
		e.storageErr = make(map[string]string)
	}
	e.storageErr[file] = err.Error()
}

// storageOKLocked records a successful write of file.
func (e *Executor) storageOKLocked(file string) {
	if _, ok := e.storageErr[file]; ok {
		delete(e.storageErr, file)
		e.log.Info("the " + fileNames[file] + " is written again")
	}
}

// storageErrorLocked is the report's storage error: every file whose last
// write failed, with the error, "" if none.
func (e *Executor) storageErrorLocked() string {
	if len(e.storageErr) == 0 {
		return ""
	}
	files := make([]string, 0, len(e.storageErr))
	for f := range e.storageErr {
		files = append(files, f)
	}
	sort.Strings(files)
	parts := make([]string, 0, len(files))
	for _, f := range files {
		parts = append(parts, "cannot write the "+fileNames[f]+": "+e.storageErr[f])
	}
	s := strings.Join(parts, "; ")
	if len(s) > maxStorageError {
		s = s[:maxStorageError]
	}
	return s
}

// diskFullNow reports whether the data directory's filesystem has less
// than the reserve left (exec runtime only: sim tasks write nothing).
func (e *Executor) diskFullNow() bool {
	if e.cfg.Runtime != RuntimeExec {
		return false
	}
	avail := availBytes(e.cfg.DataDir)
	return avail >= 0 && avail < e.cfg.DiskReserve
}
