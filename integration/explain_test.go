package integration

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/stretchr/testify/require"

	"jobmaster/fsm"
	"jobmaster/jobspec"
)

// Explaining an APART verdict from a failed run's artifact folder: each
// master's Raft log (its data directory, kept whole) is replayed into a
// fresh FSM up to the applied index the master reported at the end, and
// the logs are compared with each other. Three answers:
//
//   - the logs differ at some committed index: the replicated log itself
//     diverged (a Raft or storage fault);
//   - the logs agree, and a master's reported hash is not its own log's:
//     that master's FSM applied something other than its log (the commit
//     hazard of raftcommit_test.go leaves exactly this);
//   - the logs agree and every reported hash is its log's: the FSM is not
//     deterministic (the same log, different states).

// LogExplain is one master's log replayed.
type LogExplain struct {
	Node         string
	First, Last  uint64 // the log's indexes on disk
	SnapshotAt   uint64 // the FSM index of the snapshot the replay started from (0: none)
	Reported     KitMaster
	Replayed     string // the hash of the log replayed to the reported index
	MatchesOwnFS bool   // Replayed equals the reported hash
	Err          string
}

// logEntry is what is compared of one entry across masters.
type logEntry struct {
	term uint64
	kind raft.LogType
	sum  [32]byte
}

// explainArtifacts replays the masters' logs under dir (a run directory
// or its artifact copy, with replay.json) and says which answer holds.
func explainArtifacts(dir string) ([]LogExplain, string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "replay.json"))
	if err != nil {
		return nil, "", err
	}
	var kit ReplayKit
	if err := json.Unmarshal(b, &kit); err != nil {
		return nil, "", fmt.Errorf("replay.json: %w", err)
	}
	var out []LogExplain
	logs := map[string]map[uint64]logEntry{}
	var upTo uint64 // the lowest reported index: compare logs up to it
	for i, m := range kit.Masters {
		ex := LogExplain{Node: m.Node, Reported: m}
		entries, err := replayMaster(filepath.Join(dir, m.Node, "raft"), m.Applied, &ex)
		if err != nil {
			ex.Err = err.Error()
		}
		logs[m.Node] = entries
		if i == 0 || m.Applied < upTo {
			upTo = m.Applied
		}
		out = append(out, ex)
	}
	// The first committed index at which two masters' logs differ.
	var lines []string
	differ := ""
	for idx := uint64(1); idx <= upTo && differ == ""; idx++ {
		var ref *logEntry
		refNode := ""
		for _, m := range kit.Masters {
			e, ok := logs[m.Node][idx]
			if !ok {
				continue // compacted into a snapshot, or not on this disk
			}
			if ref == nil {
				ref, refNode = &e, m.Node
				continue
			}
			if e != *ref {
				differ = fmt.Sprintf("the logs differ at index %d: %s has term %d (%s), %s has term %d (%s)",
					idx, refNode, ref.term, ref.kind, m.Node, e.term, e.kind)
			}
		}
	}
	allOwn := true
	for _, ex := range out {
		state := "matches"
		if !ex.MatchesOwnFS {
			state, allOwn = "DOES NOT match", false
		}
		if ex.Err != "" {
			lines = append(lines, fmt.Sprintf("%s: %s", ex.Node, ex.Err))
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: log %d-%d on disk (snapshot at %d); replayed to applied index %d it hashes %s, which %s the %s (%s) it reported",
			ex.Node, ex.First, ex.Last, ex.SnapshotAt, ex.Reported.Applied, short(ex.Replayed), state, short(ex.Reported.Hash), ex.Reported.Case))
	}
	switch {
	case differ != "":
		lines = append(lines, "ANSWER: "+differ+": the replicated log itself diverged")
	case !allOwn:
		lines = append(lines, fmt.Sprintf("ANSWER: the logs agree up to index %d, and a master's state is not its own log's: its FSM applied entries its log no longer holds (see integration/raftcommit_test.go)", upTo))
	default:
		lines = append(lines, fmt.Sprintf("ANSWER: the logs agree up to index %d and every master's state is its log's", upTo))
	}
	return out, strings.Join(lines, "\n"), nil
}

// replayMaster opens a copy of one master's Raft log and snapshots and
// replays them into a fresh FSM up to applied.
func replayMaster(raftDir string, applied uint64, ex *LogExplain) (map[uint64]logEntry, error) {
	tmp, err := os.MkdirTemp("", "jobmaster-explain-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// Bolt locks and may write its file: work on a copy.
	if _, err := copyFile(filepath.Join(raftDir, "raft.db"), filepath.Join(tmp, "raft.db")); err != nil {
		return nil, err
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(tmp, "raft.db")})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if ex.First, err = store.FirstIndex(); err != nil {
		return nil, err
	}
	if ex.Last, err = store.LastIndex(); err != nil {
		return nil, err
	}
	st := fsm.NewState()
	if _, err := os.Stat(filepath.Join(raftDir, "snapshots")); err == nil && ex.First > 1 {
		if err := os.CopyFS(filepath.Join(tmp, "snap"), os.DirFS(raftDir)); err != nil {
			return nil, err
		}
		snaps, err := raft.NewFileSnapshotStore(filepath.Join(tmp, "snap"), 3, io.Discard)
		if err != nil {
			return nil, err
		}
		list, err := snaps.List()
		if err != nil {
			return nil, err
		}
		for _, meta := range list { // newest first
			if meta.Index > applied {
				continue
			}
			_, rc, err := snaps.Open(meta.ID)
			if err != nil {
				return nil, err
			}
			st, err = fsm.Restore(rc)
			rc.Close()
			if err != nil {
				return nil, fmt.Errorf("snapshot %s: %w", meta.ID, err)
			}
			ex.SnapshotAt = st.Index()
			break
		}
	}
	if ex.First > 1 && st.Index() == 0 {
		return nil, fmt.Errorf("the log starts at %d and no snapshot covers what comes before", ex.First)
	}
	entries := map[uint64]logEntry{}
	for i := ex.First; i <= ex.Last && i != 0; i++ {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			return entries, fmt.Errorf("log entry %d: %w", i, err)
		}
		entries[i] = logEntry{term: l.Term, kind: l.Type, sum: sha256.Sum256(l.Data)}
		if i <= st.Index() || i > applied {
			continue
		}
		switch l.Type {
		case raft.LogCommand:
			st.ApplyEntry(i, l.Data)
		case raft.LogConfiguration:
			st.SetIndex(i)
		}
	}
	ex.Replayed = st.Capture().Hash()
	ex.MatchesOwnFS = ex.Replayed == ex.Reported.Hash
	return entries, nil
}

var chaosExplain = flag.String("chaos.explain", "", "TestExplainArtifacts: a failed chaos run's artifact folder (or run directory) whose masters' Raft logs to replay")

// TestExplainArtifacts replays the masters' Raft logs of a failed run:
//
//	go test ./integration/ -run TestExplainArtifacts -v -chaos.explain=.artifacts/chaos/<run>
//
// and writes the answer to explain.txt in the folder too.
func TestExplainArtifacts(t *testing.T) {
	if *chaosExplain == "" {
		t.Skip("give a failed run's artifact folder with -chaos.explain")
	}
	_, text, err := explainArtifacts(*chaosExplain)
	require.NoError(t, err)
	t.Logf("\n%s", text)
	require.NoError(t, os.WriteFile(filepath.Join(*chaosExplain, "explain.txt"), []byte(text+"\n"), 0o644))
}

// fakeMaster writes a master's Raft log as Raft stores it, and returns
// the hash of the given entries applied (what the master would report).
func fakeMaster(t *testing.T, dir, node string, logs []*raft.Log, applied []*raft.Log) string {
	raftDir := filepath.Join(dir, node, "raft")
	require.NoError(t, os.MkdirAll(raftDir, 0o755))
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(raftDir, "raft.db")})
	require.NoError(t, err)
	require.NoError(t, store.StoreLogs(logs))
	require.NoError(t, store.Close())
	st := fsm.NewState()
	for _, l := range applied {
		if l.Type == raft.LogCommand {
			st.ApplyEntry(l.Index, l.Data)
		} else {
			st.SetIndex(l.Index)
		}
	}
	return st.Capture().Hash()
}

func TestExplainTellsTheThreeAnswersApart(t *testing.T) {
	spec, err := jobspec.Parse([]byte(`{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`))
	require.NoError(t, err)
	entry := func(i, term uint64, c fsm.Command) *raft.Log {
		return &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: fsm.MustEncode(c)}
	}
	conf := &raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(raft.Configuration{})}
	est := entry(2, 1, &fsm.EstablishLeadership{Node: "m1"})
	submit := func(id string) fsm.Command { return &fsm.SubmitJob{Fenced: fsm.Fenced{Token: 2}, ID: id, Spec: spec} }
	good := []*raft.Log{conf, est, entry(3, 2, submit("a"))}
	stale := []*raft.Log{conf, est, entry(3, 1, submit("stale"))}

	tests := []struct {
		name   string
		m3log  []*raft.Log // m3's log on disk
		m3fsm  []*raft.Log // what m3's FSM applied
		answer string
	}{
		{"agree", good, good, "every master's state is its log's"},
		{"a state that is not its own log's", good, stale, "a master's state is not its own log's"},
		{"logs that differ", stale, stale, "the logs differ at index 3: m1 has term 2 (LogCommand), m3 has term 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			kit := ReplayKit{}
			for _, n := range []string{"m1", "m2"} {
				kit.Masters = append(kit.Masters, KitMaster{Node: n, Applied: 3, Hash: fakeMaster(t, dir, n, good, good)})
			}
			kit.Masters = append(kit.Masters, KitMaster{Node: "m3", Applied: 3, Hash: fakeMaster(t, dir, "m3", tt.m3log, tt.m3fsm), Case: "APART"})
			require.NoError(t, kit.write(filepath.Join(dir, "replay.json")))
			_, text, err := explainArtifacts(dir)
			require.NoError(t, err)
			require.Contains(t, text, "ANSWER: ")
			require.Contains(t, text[strings.Index(text, "ANSWER: "):], tt.answer, text)
		})
	}
}
