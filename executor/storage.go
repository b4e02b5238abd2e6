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
// It logs each change, so that the executor's own log says why it gets no
// work.
func (e *Executor) diskFullNow() bool {
	if e.cfg.Runtime != RuntimeExec {
		return false
	}
	// Measured and compared under one lock: a report and a metrics scrape
	// that measured in one order must not log in the other.
	e.diskMu.Lock()
	defer e.diskMu.Unlock()
	avail := availBytes(e.cfg.DataDir)
	full := avail >= 0 && avail < e.cfg.DiskReserve
	if e.diskFullSaid != full {
		e.diskFullSaid = full
		if full {
			e.log.Warn("data directory's disk full: less than --disk-reserve free; the leader places no new work here until it clears",
				"dir", e.cfg.DataDir, "available_bytes", avail, "disk_reserve", e.cfg.DiskReserve)
		} else {
			e.log.Info("data directory's disk no longer full: new work may be placed here", "dir", e.cfg.DataDir, "available_bytes", avail)
		}
	}
	return full
}
