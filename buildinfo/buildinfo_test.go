package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestRevisionFromTheBuildsStamp(t *testing.T) {
	in := fromSettings(Info{Revision: "unknown", GoVersion: "go1.26", Platform: "linux/amd64", Wire: 3, Snapshot: 6, Commands: 16},
		[]debug.BuildSetting{{Key: "vcs.revision", Value: "4ca2d27c0ffee0123456789abcdef0123456789a"},
			{Key: "vcs.time", Value: "2026-12-07T07:20:00Z"}, {Key: "vcs.modified", Value: "true"}})
	if got, want := in.String(), "jobmaster 4ca2d27c0ffe+modified (2026-12-07T07:20:00Z), go1.26 linux/amd64, wire protocol 3, snapshot format 6, command types 1-16"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	bare := fromSettings(Info{Revision: "unknown"}, []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}})
	if bare.Revision != "unknown" || bare.Short() != "unknown" {
		t.Fatalf("without a revision: %+v", bare)
	}
	if got := bare.String(); !strings.HasPrefix(got, "jobmaster (commit unknown: built outside git, or with -buildvcs=false), ") {
		t.Fatalf("String() without a revision = %q", got)
	}
}
