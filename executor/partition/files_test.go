package partition

import (
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

var outputs = []wire.Output{
	{Vertex: "count", Parallelism: 3, Mode: wire.ModeBlocking},
	{Vertex: "map", Parallelism: 4, Mode: wire.ModePipelined, Forward: true},
}

func TestWhichFilesCount(t *testing.T) {
	tests := []struct {
		consumer, name string
		want           bool
		why            string
	}{
		{"count", "0", true, "all-to-all: every index below the parallelism"},
		{"count", "2", true, ""},
		{"count", "3", false, "index out of range"},
		{"count", "01", false, "not the canonical spelling"},
		{"count", "+1", false, "a sign"},
		{"count", "-1", false, "negative"},
		{"count", "1.txt", false, "another name"},
		{"count", "", false, "empty"},
		{"count", "99999999999999999999", false, "absurdly large"},
		{"map", "1", true, "forward: the producer's own index (1)"},
		{"map", "0", false, "forward: another index"},
		{"map", "2", false, "forward: another index"},
		{"other", "0", false, "not a consumer vertex"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, Counts(outputs, 1, tc.consumer, tc.name), "%s/%s: %s", tc.consumer, tc.name, tc.why)
	}
}

func TestKeep(t *testing.T) {
	tests := []struct {
		consumer, name string
		mode           fs.FileMode
		want           bool
	}{
		{"", "count", fs.ModeDir, true},
		{"", "map", fs.ModeDir, true},
		{"", "count", 0, false},                 // a file where a consumer's directory belongs
		{"", "count", fs.ModeSymlink, false},    // a link to a directory elsewhere
		{"", "notes", fs.ModeDir, false},        // not a consumer
		{"", "0", 0, false},                     // data outside a consumer's directory
		{"count", "0", 0, true},                 // a regular file
		{"count", "0", fs.ModeSymlink, false},   // a link, even to a regular file
		{"count", "0", fs.ModeNamedPipe, false}, // special files
		{"count", "0", fs.ModeDevice, false},
		{"count", "0", fs.ModeSocket, false},
		{"count", "0", fs.ModeDir, false}, // a nested directory
		{"count", "7", 0, false},
		{"map", "1", 0, true},
		{"map", "0", 0, false},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, Keep(outputs, 1, tc.consumer, tc.name, tc.mode), "%q/%q %v", tc.consumer, tc.name, tc.mode)
	}
}

func TestWanted(t *testing.T) {
	require.True(t, Wanted(outputs, 1, "count", 0))
	require.False(t, Wanted(outputs, 1, "count", 3))
	require.False(t, Wanted(outputs, 1, "count", -1))
	require.True(t, Wanted(outputs, 3, "map", 3))
	require.False(t, Wanted(outputs, 3, "map", 2))
	require.False(t, Wanted(nil, 0, "count", 0))
}

func TestParseIndex(t *testing.T) {
	for s, want := range map[string]int{"0": 0, "7": 7, "9999": 9999} {
		n, ok := ParseIndex(s)
		require.True(t, ok, s)
		require.Equal(t, want, n)
	}
	for _, s := range []string{"", "10000", "00", "007", "-0", " 1", "1e3", "0x1", "１"} {
		_, ok := ParseIndex(s)
		require.False(t, ok, "%q", s)
	}
}

func TestCheckLoaded(t *testing.T) {
	m := Meta{ID: "j/gen/2/0", JobID: "j", Vertex: "gen", Subtask: 2, Attempt: 0, Bytes: 10}
	tests := []struct {
		name  string
		meta  Meta
		id    string
		bytes int64
		ok    bool
	}{
		{"whole", m, "j/gen/2/0", 10, true},
		{"in another directory", m, "j/gen/2/1", 10, false},
		{"fields that disagree with the id", Meta{ID: "j/gen/2/0", JobID: "j", Vertex: "gen", Subtask: 3, Bytes: 10}, "j/gen/2/0", 10, false},
		{"bytes lost", m, "j/gen/2/0", 9, false},
		{"bytes added", m, "j/gen/2/0", 11, false},
		{"empty metadata", Meta{}, "j/gen/2/0", 0, false},
	}
	for _, tc := range tests {
		ok, why := CheckLoaded(tc.meta, tc.id, tc.bytes)
		require.Equal(t, tc.ok, ok, "%s: %s", tc.name, why)
		if !ok {
			require.NotEmpty(t, why, tc.name)
		}
	}
}

func TestKeepOutput(t *testing.T) {
	for _, st := range []wire.State{wire.StateDeploying, wire.StateRunning, wire.StateCanceling, wire.StateFinished, wire.StateFailed, wire.StateCanceled} {
		require.Equal(t, st == wire.StateFinished, KeepOutput(st), st)
	}
}

func TestBackoffSchedule(t *testing.T) {
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		require.Equal(t, w, Backoff(i+1), "after %d failures", i+1)
	}
	require.Equal(t, MaxBackoff, Backoff(1000), "no overflow")
}

func TestRetry(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		elapsed  time.Duration
		failures int
		bound    time.Duration
		wait     time.Duration
		giveUp   bool
	}{
		{"first failure", 0, 1, time.Minute, 100 * time.Millisecond, false},
		{"third failure", 300 * time.Millisecond, 3, time.Minute, 400 * time.Millisecond, false},
		{"late failures wait at most 10s", 30 * time.Second, 12, time.Minute, 10 * time.Second, false},
		{"the last attempt is made at the bound", 55 * time.Second, 12, time.Minute, 5 * time.Second, false},
		{"failing for the whole bound", time.Minute, 13, time.Minute, 0, true},
		{"past the bound", 2 * time.Minute, 2, time.Minute, 0, true},
		{"a small bound", 250 * time.Millisecond, 3, 300 * time.Millisecond, 50 * time.Millisecond, false},
	}
	for _, tc := range tests {
		wait, giveUp := Retry(t0, t0.Add(tc.elapsed), tc.failures, tc.bound)
		require.Equal(t, tc.giveUp, giveUp, tc.name)
		require.Equal(t, tc.wait, wait, tc.name)
	}
}
