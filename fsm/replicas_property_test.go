package fsm

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Replicas of the FSM as the masters run them: one log, several FSMs, each
// applying it at its own pace and in its own batches through Raft's
// interfaces, some of them sent another replica's snapshot when they lag
// (InstallSnapshot) or restarted from their own latest snapshot (which Raft
// then replays the log onto). Whatever the interleaving, two replicas at
// the same applied index must have the same hash, every entry must give
// every replica that applies it the same results, and all must end equal.
// This is what the chaos suite's same-state-hash check asks of the real
// masters (integration/checker_replicas.go), without processes or clocks.

// replicaSpecs add to propertySpecs what travels through msgpack less
// trivially: an env map, a named slot sharing group, a pipelined edge.
var replicaSpecs = []string{
	`{"vertices":[{"id":"v","parallelism":2,"command":["sh","-c","x"],"env":{"B":"2","A":"1"}}],"restart":{"strategy":"fixed-delay","attempts":3,"delay":"0s"}}`,
	`{"vertices":[{"id":"s","parallelism":2,"command":["x"],"slot_sharing_group":"g"},{"id":"m","parallelism":2,"command":["x"],"slot_sharing_group":"g","inputs":[{"from":"s","mode":"pipelined"}]}],
		"restart":{"strategy":"exponential-delay","initial_delay":"10ms","max_delay":"50ms","jitter":0.5}}`,
}

// replicaSink keeps a persisted snapshot in memory.
type replicaSink struct{ bytes.Buffer }

func (*replicaSink) ID() string    { return "replica" }
func (*replicaSink) Cancel() error { return nil }
func (*replicaSink) Close() error  { return nil }

// heldSnapshot is a snapshot a replica took, as Raft keeps it.
type heldSnapshot struct {
	index uint64 // the FSM's applied index in it
	data  []byte
}

type replica struct {
	name  string
	f     *FSM
	next  int // position in the log of the next entry to apply
	snaps []heldSnapshot
}

func (r *replica) snapshot(t *rapid.T) heldSnapshot {
	snap, err := r.f.Snapshot()
	require.NoError(t, err)
	var sink replicaSink
	require.NoError(t, snap.Persist(&sink))
	snap.Release()
	c := r.f.Capture()
	return heldSnapshot{index: c.Index(), data: sink.Bytes()}
}

func (r *replica) restore(t *rapid.T, s heldSnapshot, log []*raft.Log) {
	require.NoError(t, r.f.Restore(io.NopCloser(bytes.NewReader(s.data))))
	// Raft goes on with the first entry after the snapshot.
	r.next = 0
	for r.next < len(log) && log[r.next].Index <= s.index {
		r.next++
	}
}

func TestPropertyReplicasAgreeAtEveryIndex(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		leader := NewState()  // the leader's own view: commands are drawn against it
		leader.RecordEvents() // as every master's FSM does, so results carry events
		var log []*raft.Log
		results := map[uint64]string{} // the leader's results per entry index
		hashAt := map[uint64]string{}  // the first hash seen at each applied index, and by whom
		whoAt := map[uint64]string{}
		var token uint64
		now := int64(1_000_000)
		raftIndex := uint64(0) // Raft's index, which moves on entries the FSM never sees too

		check := func(who string, f *FSM) {
			c := f.Capture()
			h, i := c.Hash(), c.Index()
			if prev, ok := hashAt[i]; ok {
				require.Equal(t, prev, h, "%s and %s differ at applied index %d", whoAt[i], who, i)
				return
			}
			hashAt[i], whoAt[i] = h, who
		}

		reps := make([]*replica, rapid.IntRange(2, 4).Draw(t, "replicas"))
		for k := range reps {
			reps[k] = &replica{name: fmt.Sprintf("r%d", k+1), f: New()}
		}
		for step, steps := 0, rapid.IntRange(1, 250).Draw(t, "steps"); step < steps; step++ {
			r := reps[rapid.IntRange(0, len(reps)-1).Draw(t, "replica")]
			switch rapid.IntRange(0, 11).Draw(t, "action") {
			case 0, 1, 2, 3, 4: // the leader appends an entry
				raftIndex += uint64(rapid.IntRange(1, 3).Draw(t, "gap")) // no-ops and barriers between
				l := &raft.Log{Index: raftIndex, Type: raft.LogCommand}
				if rapid.IntRange(0, 9).Draw(t, "config") == 0 {
					l.Type = raft.LogConfiguration
					leader.SetIndex(l.Index)
				} else {
					var entry []byte
					for n := rapid.IntRange(1, 3).Draw(t, "batch"); n > 0; n-- {
						var c Command
						if rapid.IntRange(0, 7).Draw(t, "extra spec") == 0 {
							c = &SubmitJob{Fenced: Fenced{Token: token, Time: now}, ID: rapid.SampledFrom(propertyJobs).Draw(t, "job"),
								Spec: parseSpec(t, rapid.SampledFrom(replicaSpecs).Draw(t, "spec"))}
						} else {
							c = genCommand(t, leader, &token, &now)
						}
						var err error
						entry, err = Encode(entry, c)
						require.NoError(t, err)
					}
					l.Data = entry
					rs := leader.ApplyEntry(l.Index, entry)
					leader.TakeEvents()
					for _, res := range rs {
						if res.Epoch != 0 {
							token = res.Epoch
						}
					}
					results[l.Index] = fmt.Sprint(rs)
				}
				log = append(log, l)
				check("the leader", &FSM{state: leader})
			case 5, 6, 7: // a replica applies a batch of what it has not
				n := min(rapid.IntRange(1, 8).Draw(t, "apply"), len(log)-r.next)
				if n == 0 {
					continue
				}
				batch := log[r.next : r.next+n]
				out := r.f.ApplyBatch(batch)
				for i, l := range batch {
					if l.Type == raft.LogCommand {
						require.Equal(t, results[l.Index], fmt.Sprint(out[i]), "%s's results for the entry at %d", r.name, l.Index)
					}
				}
				r.next += n
				check(r.name, r.f)
			case 8: // a replica takes a snapshot
				r.snaps = append(r.snaps, r.snapshot(t))
			case 9: // a lagging replica is sent another's latest snapshot
				var from *replica
				for _, o := range reps {
					if o != r && len(o.snaps) > 0 && (from == nil || o.snaps[len(o.snaps)-1].index > from.snaps[len(from.snaps)-1].index) {
						from = o
					}
				}
				if from == nil {
					continue
				}
				s := from.snaps[len(from.snaps)-1]
				if s.index < r.f.Capture().Index() {
					continue // Raft sends a snapshot only to a follower behind it
				}
				r.restore(t, s, log)
				check(r.name+" (restored from "+from.name+")", r.f)
			case 10: // a replica restarts: its latest snapshot, then the log
				r.f = New()
				r.next = 0
				if len(r.snaps) > 0 {
					r.restore(t, r.snaps[len(r.snaps)-1], log)
				}
				check(r.name+" (restarted)", r.f)
			default: // a replica snapshots itself and restores that at once
				s := r.snapshot(t)
				r.restore(t, s, log)
				check(r.name+" (restored from itself)", r.f)
			}
		}
		// Everyone catches up: all equal, and equal to the leader.
		want := leader.Capture().Hash()
		for _, r := range reps {
			if r.next < len(log) {
				out := r.f.ApplyBatch(log[r.next:])
				for i, l := range log[r.next:] {
					if l.Type == raft.LogCommand {
						require.Equal(t, results[l.Index], fmt.Sprint(out[i]), "%s's results for the entry at %d", r.name, l.Index)
					}
				}
				r.next = len(log)
			}
			require.Equal(t, leader.Index(), r.f.Capture().Index(), "%s's applied index", r.name)
			require.Equal(t, want, r.f.Capture().Hash(), "%s at the end", r.name)
			r.f.Read(func(st *State) { checkInvariants(t, st) })
		}
	})
}
