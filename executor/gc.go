package executor

import (
	"cmp"
	"slices"
	"time"
)

// Garbage collection of execution directories (working directory and
// logs). The decision is gcPlan, a function of what is on disk, the limits
// and the time; gcloop.go gathers its input and carries it out.
//
// Rules:
//   - an execution the executor still holds (live, or terminal and not yet
//     acknowledged) is never deleted, but its directory counts towards the
//     disk limit;
//   - every other one (ended and acknowledged, or left by an earlier life
//     of the executor) is deleted once Retention has passed since it ended;
//   - while the directories together take more than MaxBytes (if set), the
//     ones that ended first go first, ties by id, until they fit or only
//     held ones are left;
//   - while the disk is full (less than --disk-reserve free: Short bytes
//     missing), the same, whatever the retention and the limit, until as
//     much as is missing is freed: a full disk takes no new work, and
//     would otherwise stay full until the retention passed.

// gcEntry is one execution directory.
type gcEntry struct {
	ID string
	// Ended is when it was last written (its task's end).
	Ended time.Time
	// Bytes is the disk space it takes.
	Bytes int64
	// Held: the executor holds the execution; it is kept.
	Held bool
}

// gcLimits are the collector's settings.
type gcLimits struct {
	// Retention is how long an ended, acknowledged execution's directory
	// is kept.
	Retention time.Duration
	// MaxBytes bounds the space of every execution directory together (0:
	// no bound).
	MaxBytes int64
	// Short is how many bytes the disk lacks to hold --disk-reserve free
	// (0: it is not full).
	Short int64
}

// Why a directory is deleted.
const (
	gcByAge  = "age"
	gcByDisk = "disk"
	gcByFull = "disk_full"
)

// gcDelete is one directory to delete and why.
type gcDelete struct {
	ID     string
	Reason string
	Bytes  int64
}

// gcPlan decides which execution directories to delete at now, oldest
// first.
func gcPlan(entries []gcEntry, lim gcLimits, now time.Time) []gcDelete {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b gcEntry) int {
		if c := a.Ended.Compare(b.Ended); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	var total int64
	for _, e := range sorted {
		total += e.Bytes
	}
	short := lim.Short
	var out []gcDelete
	for _, e := range sorted {
		if e.Held {
			continue
		}
		switch {
		case now.Sub(e.Ended) >= lim.Retention:
			out = append(out, gcDelete{ID: e.ID, Reason: gcByAge, Bytes: e.Bytes})
		case lim.MaxBytes > 0 && total > lim.MaxBytes:
			out = append(out, gcDelete{ID: e.ID, Reason: gcByDisk, Bytes: e.Bytes})
		case short > 0:
			out = append(out, gcDelete{ID: e.ID, Reason: gcByFull, Bytes: e.Bytes})
		default:
			continue
		}
		total -= e.Bytes
		short -= e.Bytes
	}
	return out
}
