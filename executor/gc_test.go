package executor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestGCPlan: the collector's rules, case by case.
func TestGCPlan(t *testing.T) {
	now := time.Unix(10_000, 0)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	hour := time.Hour
	cases := []struct {
		name    string
		entries []gcEntry
		lim     gcLimits
		want    []string // id:reason, in order
	}{
		{"nothing", nil, gcLimits{Retention: hour}, nil},
		{"young ones stay", []gcEntry{{ID: "a", Ended: ago(59 * time.Minute), Bytes: 10}}, gcLimits{Retention: hour}, nil},
		{"old ones go", []gcEntry{{ID: "a", Ended: ago(hour), Bytes: 10}, {ID: "b", Ended: ago(2 * hour)}},
			gcLimits{Retention: hour}, []string{"b:age", "a:age"}},
		{"held ones stay however old", []gcEntry{{ID: "a", Ended: ago(9 * hour), Held: true}}, gcLimits{Retention: hour}, nil},
		{"under the disk limit nothing young goes",
			[]gcEntry{{ID: "a", Ended: ago(time.Minute), Bytes: 50}, {ID: "b", Ended: ago(2 * time.Minute), Bytes: 50}},
			gcLimits{Retention: hour, MaxBytes: 100}, nil},
		{"over the disk limit the oldest go first, until it fits",
			[]gcEntry{{ID: "c", Ended: ago(time.Minute), Bytes: 50}, {ID: "a", Ended: ago(3 * time.Minute), Bytes: 50},
				{ID: "b", Ended: ago(2 * time.Minute), Bytes: 50}},
			gcLimits{Retention: hour, MaxBytes: 100}, []string{"a:disk"}},
		{"held ones count towards the limit but stay",
			[]gcEntry{{ID: "a", Ended: ago(3 * time.Minute), Bytes: 80, Held: true}, {ID: "b", Ended: ago(2 * time.Minute), Bytes: 30},
				{ID: "c", Ended: ago(time.Minute), Bytes: 30}},
			gcLimits{Retention: hour, MaxBytes: 100}, []string{"b:disk", "c:disk"}},
		{"age first, then the limit on what is left",
			[]gcEntry{{ID: "old", Ended: ago(2 * hour), Bytes: 500}, {ID: "b", Ended: ago(2 * time.Minute), Bytes: 60},
				{ID: "c", Ended: ago(time.Minute), Bytes: 60}},
			gcLimits{Retention: hour, MaxBytes: 100}, []string{"old:age", "b:disk"}},
		{"ties by id", []gcEntry{{ID: "b", Ended: ago(time.Minute), Bytes: 60}, {ID: "a", Ended: ago(time.Minute), Bytes: 60}},
			gcLimits{Retention: hour, MaxBytes: 100}, []string{"a:disk"}},
		{"a full disk: the oldest go, whatever the retention, until what is missing is freed",
			[]gcEntry{{ID: "c", Ended: ago(time.Minute), Bytes: 50}, {ID: "a", Ended: ago(3 * time.Minute), Bytes: 50},
				{ID: "b", Ended: ago(2 * time.Minute), Bytes: 50}, {ID: "held", Ended: ago(9 * time.Minute), Bytes: 500, Held: true}},
			gcLimits{Retention: hour, Short: 60}, []string{"a:disk_full", "b:disk_full"}},
		{"a full disk: what the age and the limit free counts",
			[]gcEntry{{ID: "old", Ended: ago(2 * hour), Bytes: 10}, {ID: "b", Ended: ago(2 * time.Minute), Bytes: 60},
				{ID: "c", Ended: ago(time.Minute), Bytes: 60}, {ID: "d", Ended: ago(time.Second), Bytes: 60}},
			gcLimits{Retention: hour, MaxBytes: 150, Short: 80}, []string{"old:age", "b:disk", "c:disk_full"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range gcPlan(tc.entries, tc.lim, now) {
				got = append(got, d.ID+":"+d.Reason)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("gcPlan = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestScanExecutions: the directories found are execution ids, with the
// newest time inside each and their space.
func TestScanExecutions(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "j", "v", "0", "1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stdout.log"), make([]byte, 10_000), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(5000, 0)
	for _, p := range []string{filepath.Join(dir, "stdout.log"), dir} {
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "j", "v", "not-a-number", "0"), 0o700); err != nil {
		t.Fatal(err)
	}
	got := scanExecutions(root)
	if len(got) != 1 || got[0].ID != "j/v/0/1" || !got[0].Ended.Equal(at) || got[0].Bytes < 10_000 {
		t.Fatalf("scan = %+v, want j/v/0/1 ended at %v with at least 10000 bytes", got, at)
	}
}

// The collector deletes an execution's directory only if the execution is
// still not held when it comes to it: one deployed again since the scan
// (a job id used again after its job was forgotten starts from the same
// execution ids) keeps its directory.
func TestCollectorLeavesAnExecutionDeployedSinceItsScan(t *testing.T) {
	t.Parallel()
	e, l := startExecExecutor(t, Config{NodeID: "e1", DataDir: t.TempDir()})
	tk := task("reused", 0, 0, "sh", "-c", "echo $$; exec sleep 300")
	l.deploy(tk)
	l.firstLinePID(tk.ExecutionID)
	deleted, err := e.deleteExecution(tk.ExecutionID)
	if err != nil || deleted {
		t.Fatalf("deleteExecution of a held execution = %v, %v; want false, nil", deleted, err)
	}
	if _, err := os.Stat(executionDir(e.cfg.DataDir, tk.ExecutionID)); err != nil {
		t.Fatalf("the running task's directory: %v", err)
	}
}
