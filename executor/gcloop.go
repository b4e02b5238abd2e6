package executor

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"jobmaster/internal/forceremove"
)

// executionsDir is where the execution directories live under DataDir.
const executionsDir = "executions"

// gcLoop collects the garbage of execution directories every
// Config.GCInterval (gcPlan decides; this carries it out). It is the one
// goroutine that deletes execution directories.
func (e *Executor) gcLoop() {
	defer e.loops.Done()
	t := time.NewTicker(e.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-e.quit:
			return
		case <-t.C:
			e.collect()
		}
	}
}

// collect runs one collection: it lists the execution directories, asks
// gcPlan which to delete, and deletes them.
func (e *Executor) collect() {
	if e.cfg.Runtime != RuntimeExec {
		return
	}
	if rt, ok := e.rt.(*execRuntime); ok {
		rt.sweepCgroups()
	}
	entries := scanExecutions(filepath.Join(e.cfg.DataDir, executionsDir))
	e.mu.Lock()
	for i := range entries {
		_, entries[i].Held = e.held.get(entries[i].ID)
	}
	e.mu.Unlock()
	var total int64
	for _, en := range entries {
		total += en.Bytes
	}
	var short int64
	if avail := availBytes(e.cfg.DataDir); avail >= 0 && avail < e.cfg.DiskReserve {
		short = e.cfg.DiskReserve - avail
	}
	plan := gcPlan(entries, gcLimits{Retention: e.cfg.GCRetention, MaxBytes: e.cfg.GCDiskLimit, Short: short}, e.cfg.Now())
	var freed int64
	byReason := map[string]int{}
	for _, d := range plan {
		deleted, err := e.deleteExecution(d.ID)
		if !deleted && err == nil {
			continue // deployed again (a reused job id) since the scan
		}
		if err != nil {
			e.log.Warn("cannot delete an execution directory", "execution", d.ID, "err", err)
			continue
		}
		e.log.Debug("execution directory deleted", "execution", d.ID, "reason", d.Reason, "bytes", d.Bytes)
		e.metrics.gcDeleted.WithLabelValues(d.Reason).Inc()
		e.metrics.gcBytes.Add(float64(d.Bytes))
		byReason[d.Reason]++
		freed += d.Bytes
	}
	e.gcMu.Lock()
	e.execBytes = total - freed
	e.gcMu.Unlock()
	if len(byReason) > 0 {
		e.log.Info("execution directories deleted", "by_age", byReason[gcByAge], "by_disk_limit", byReason[gcByDisk], "for_a_full_disk", byReason[gcByFull],
			"bytes_freed", freed, "bytes_left", total-freed, "retention", e.cfg.GCRetention, "disk_limit", e.cfg.GCDiskLimit)
	}
}

// deleteExecution deletes an execution directory and then its parents
// (subtask, vertex, job) that it leaves empty, unless the execution is
// held again (deployed since the scan: a job id used again after its job
// was forgotten starts from the same execution ids), and reports whether
// it did. A task's start creates its directory and those parents under
// the same lock, so none vanishes under it.
func (e *Executor) deleteExecution(id string) (bool, error) {
	e.dirMu.Lock()
	defer e.dirMu.Unlock()
	e.mu.Lock()
	_, held := e.held.get(id)
	e.mu.Unlock()
	if held {
		return false, nil
	}
	dir := executionDir(e.cfg.DataDir, id)
	if err := forceremove.All(dir); err != nil {
		return false, err
	}
	root := filepath.Join(e.cfg.DataDir, executionsDir)
	for p := filepath.Dir(dir); p != root && strings.HasPrefix(p, root); p = filepath.Dir(p) {
		if os.Remove(p) != nil { // not empty
			break
		}
	}
	return true, nil
}

// scanExecutions lists the execution directories under root
// (<job>/<vertex>/<subtask>/<attempt>): each with the newest modification
// time of anything in it and the disk space it takes. Names that are not
// execution ids are left alone.
func scanExecutions(root string) []gcEntry {
	var out []gcEntry
	var walk func(dir string, parts []string)
	walk = func(dir string, parts []string) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, ent := range ents {
			if !ent.IsDir() {
				continue
			}
			p := filepath.Join(dir, ent.Name())
			next := append(parts[:len(parts):len(parts)], ent.Name())
			if len(next) < 4 {
				walk(p, next)
				continue
			}
			id := strings.Join(next, "/")
			if validateExecutionID(id) != nil {
				continue
			}
			en := gcEntry{ID: id}
			en.Ended, en.Bytes = dirUsage(p)
			out = append(out, en)
		}
	}
	walk(root, nil)
	return out
}

// dirUsage is the newest modification time in the tree at dir and the
// disk space its files take (allocated blocks), without following
// symbolic links.
func dirUsage(dir string) (newest time.Time, bytes int64) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			bytes += st.Blocks * 512
		} else {
			bytes += fi.Size()
		}
		return nil
	})
	return newest, bytes
}
