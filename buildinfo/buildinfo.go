// Package buildinfo says which build of jobmaster a binary is: its
// revision (from the version control stamp Go puts in a binary built in a
// checkout), its Go version, and the versions of what it shares with other
// nodes: the wire protocol, the snapshot format and the command types. An
// operator reads it before a rolling upgrade (`jobmaster version`), and a
// node's metrics carry it (jobmaster_build_info).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is a build's identity.
type Info struct {
	// Revision is the commit the binary was built from ("unknown" when
	// it was built outside a checkout), with "+modified" when the
	// checkout had changes.
	Revision string `json:"revision"`
	// Time is the commit's time, RFC 3339, or "".
	Time      string `json:"commit_time,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	// Wire is the master-executor protocol version; Snapshot the snapshot
	// format written (and the newest read); Commands the newest replicated
	// command type applied.
	Wire     int `json:"wire_protocol"`
	Snapshot int `json:"snapshot_format"`
	Commands int `json:"command_types"`
}

// Read is this binary's Info, given the versions of what it shares with
// other nodes (their packages own them).
func Read(wire, snapshot, commands int) Info {
	in := Info{Revision: "unknown", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Wire: wire, Snapshot: snapshot, Commands: commands}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	return fromSettings(in, bi.Settings)
}

// fromSettings fills in's revision and time from a build's settings.
func fromSettings(in Info, settings []debug.BuildSetting) Info {
	modified := false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && in.Revision != "unknown" {
		in.Revision += "+modified"
	}
	return in
}

// Short is the revision cut to 12 characters (and its "+modified").
func (in Info) Short() string {
	rev, mod, _ := strings.Cut(in.Revision, "+")
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if mod != "" {
		rev += "+" + mod
	}
	return rev
}

// String is Info on one line, as `jobmaster --version` prints it.
func (in Info) String() string {
	s := "jobmaster " + in.Short()
	if in.Revision == "unknown" {
		s = "jobmaster (commit unknown: built outside git, or with -buildvcs=false)"
	}
	if in.Time != "" {
		s += " (" + in.Time + ")"
	}
	return s + fmt.Sprintf(", %s %s, wire protocol %d, snapshot format %d, command types 1-%d",
		in.GoVersion, in.Platform, in.Wire, in.Snapshot, in.Commands)
}
