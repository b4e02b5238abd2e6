package reconcile

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"jobmaster/fsm"
	"jobmaster/wire"
)

func ex(id string, st wire.State, deployed bool, deployIdx, ackIdx uint64, deployTime int64) fsm.Execution {
	return fsm.Execution{ID: id, State: st, Deployed: deployed, DeployIndex: deployIdx, AckIndex: ackIdx, DeployTime: deployTime, Executor: "e1"}
}

func rep(id string, st wire.State) wire.ExecutionStatus {
	return wire.ExecutionStatus{ExecutionID: id, State: st}
}

func TestReconcile(t *testing.T) {
	cases := []struct {
		name     string
		expected []fsm.Execution
		reported []wire.ExecutionStatus
		partial  bool
		want     Result
	}{
		{name: "all as expected",
			expected: []fsm.Execution{ex("a", wire.StateRunning, true, 1, 2, 0)},
			reported: []wire.ExecutionStatus{rep("a", "RUNNING")}},
		{name: "unknown live is cancelled, unknown terminal acknowledged",
			reported: []wire.ExecutionStatus{rep("x", "RUNNING"), rep("y", "FINISHED"), rep("z", "CANCELING")},
			want:     Result{Cancel: []string{"x", "z"}, Unknown: []string{"x", "z"}, Ack: []string{"y"}}},
		{name: "deployed and absent is missing",
			expected: []fsm.Execution{ex("a", wire.StateRunning, true, 1, 2, 0)},
			want:     Result{Missing: []string{"a"}}},
		{name: "acknowledged after the heartbeat was sent is not missing",
			expected: []fsm.Execution{ex("a", wire.StateRunning, true, 1, 11, 0)}},
		{name: "partial reports never make anything missing",
			expected: []fsm.Execution{ex("a", wire.StateRunning, true, 1, 2, 0)}, partial: true},
		{name: "pending is never missing: deployed again within the deadline",
			expected: []fsm.Execution{ex("a", wire.StateDeploying, false, 5, 0, 9_000)},
			want:     Result{Redeploy: []string{"a"}}},
		{name: "pending placed after the heartbeat was sent is left to its deploy",
			expected: []fsm.Execution{ex("a", wire.StateDeploying, false, 12, 0, 9_000)}},
		{name: "pending past the deadline expires",
			expected: []fsm.Execution{ex("a", wire.StateDeploying, false, 5, 0, 1_000)},
			want:     Result{Expired: []string{"a"}}},
		{name: "reporting a pending execution acknowledges it",
			expected: []fsm.Execution{ex("a", wire.StateDeploying, false, 5, 0, 9_000)},
			reported: []wire.ExecutionStatus{rep("a", "DEPLOYING")},
			want:     Result{Record: []fsm.ReportUpdate{{ID: "a", State: wire.StateDeploying}}}},
		{name: "progress and terminal states are recorded",
			expected: []fsm.Execution{ex("a", wire.StateDeploying, true, 1, 2, 0), ex("b", wire.StateRunning, true, 1, 2, 0)},
			reported: []wire.ExecutionStatus{rep("a", "RUNNING"), {ExecutionID: "b", State: "FAILED", Message: "exit status 2"}},
			want: Result{Record: []fsm.ReportUpdate{{ID: "a", State: wire.StateRunning},
				{ID: "b", State: wire.StateFailed, Message: "exit status 2"}}}},
		{name: "cancelling: retried while reported live, ended when gone",
			expected: []fsm.Execution{ex("a", wire.StateCanceling, true, 1, 2, 0), ex("b", wire.StateCanceling, true, 1, 2, 0)},
			reported: []wire.ExecutionStatus{rep("a", "RUNNING")},
			want:     Result{Cancel: []string{"a"}, Missing: []string{"b"}}},
		{name: "cancelling and pending: left alone while its deployment may be in flight",
			expected: []fsm.Execution{ex("a", wire.StateCanceling, false, 5, 0, 9_000)}},
		{name: "cancelling and pending past the deadline expires",
			expected: []fsm.Execution{ex("a", wire.StateCanceling, false, 5, 0, 1_000)},
			want:     Result{Expired: []string{"a"}}},
		{name: "an id listed twice counts once",
			expected: []fsm.Execution{ex("a", wire.StateRunning, true, 1, 2, 0)},
			reported: []wire.ExecutionStatus{rep("x", "RUNNING"), rep("x", "RUNNING"), rep("a", "RUNNING"), rep("a", "FAILED"), rep("", "RUNNING"), rep("", "RUNNING")},
			want:     Result{Cancel: []string{"x", ""}, Unknown: []string{"x", ""}}},
		{name: "cancelling and pending: acknowledged and cancelled again",
			expected: []fsm.Execution{ex("a", wire.StateCanceling, false, 1, 0, 9_000)},
			reported: []wire.ExecutionStatus{rep("a", "RUNNING")},
			want:     Result{Record: []fsm.ReportUpdate{{ID: "a", State: wire.StateRunning}}, Cancel: []string{"a"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Reconcile(Input{Executor: "e1", Expected: c.expected, Reported: c.reported, Partial: c.partial,
				BaseIndex: 10, Now: 10_000, AckDeadline: 5 * time.Second})
			require.Equal(t, c.want, got)
		})
	}
}

func TestCommands(t *testing.T) {
	r := Result{Record: []fsm.ReportUpdate{{ID: "a", State: wire.StateRunning}}, Missing: []string{"b"}, Expired: []string{"c"}, Cancel: []string{"d"}}
	cmds := Commands("e1", r, 7, 99, 10*time.Second)
	require.Len(t, cmds, 3)
	require.Equal(t, &fsm.ReportExecutions{Fenced: fsm.Fenced{Token: 7, Time: 99}, Executor: "e1", Updates: r.Record}, cmds[0])
	require.Equal(t, []string{"b"}, cmds[1].(*fsm.FailExecutions).IDs)
	require.Contains(t, cmds[2].(*fsm.FailExecutions).Reason, "not acknowledged within 10s")
	require.Empty(t, Commands("e1", Result{Cancel: []string{"x"}}, 7, 99, time.Second))
}

func TestPartitions(t *testing.T) {
	tracked := []fsm.Partition{{ID: "j/g/0/0", Index: 5}, {ID: "j/g/1/0", Index: 9}}
	live := func(id string) bool { return id == "j/g/2/0" }
	rep := func(ids ...string) []wire.Partition {
		var out []wire.Partition
		for _, id := range ids {
			out = append(out, wire.Partition{ID: id})
		}
		return out
	}
	for _, c := range []struct {
		name          string
		reported      []wire.Partition
		partial       bool
		base          uint64
		release, lost []string
	}{
		{"all there", rep("j/g/0/0", "j/g/1/0"), false, 9, nil, nil},
		{"one gone", rep("j/g/1/0"), false, 9, nil, []string{"j/g/0/0"}},
		{"recorded after the report was asked for", rep(), false, 6, nil, []string{"j/g/0/0"}},
		{"untracked: released", rep("j/g/0/0", "j/g/1/0", "old/g/0/0"), false, 9, []string{"old/g/0/0"}, nil},
		{"producer not ended yet: in flight", rep("j/g/0/0", "j/g/1/0", "j/g/2/0"), false, 9, nil, nil},
		{"partial: nothing lost", rep("x/g/0/0"), true, 9, []string{"x/g/0/0"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Partitions(PartitionInput{Tracked: tracked, Reported: c.reported, Partial: c.partial, BaseIndex: c.base, ProducerLive: live})
			require.Equal(t, c.release, got.Release, "release")
			require.Equal(t, c.lost, got.Lost, "lost")
		})
	}
}

// An executor's message is recorded cut to wire.MaxStatusMessage bytes,
// marked, and still valid UTF-8 where it was cut in the middle of a rune.
func TestLongMessageIsCut(t *testing.T) {
	for _, msg := range []string{strings.Repeat("x", 1<<20), strings.Repeat("é", wire.MaxStatusMessage), strings.Repeat("x", wire.MaxStatusMessage)} {
		got := Reconcile(Input{Executor: "e1", Expected: []fsm.Execution{ex("a", wire.StateRunning, true, 1, 2, 0)},
			Reported: []wire.ExecutionStatus{{ExecutionID: "a", State: wire.StateFailed, Message: msg}}, BaseIndex: 10, Now: 10_000})
		require.Len(t, got.Record, 1)
		m := got.Record[0].Message
		require.LessOrEqual(t, len(m), wire.MaxStatusMessage)
		require.True(t, utf8.ValidString(m), "cut inside a rune")
		if len(msg) <= wire.MaxStatusMessage {
			require.Equal(t, msg, m)
		} else {
			require.True(t, strings.HasSuffix(m, "…") && strings.HasPrefix(msg, strings.TrimSuffix(m, "…")), "cut %q...", m[:20])
		}
	}
}

// A CANCELED of a lease expiry is recorded Fenced (its restart not
// counted) only for an execution the executor stopped before the leader
// renewed its lease; any other CANCELED never is.
func TestLeaseExpiryIsFencedOnlyWhenStoppedEarly(t *testing.T) {
	expected := []fsm.Execution{ex("a", wire.StateRunning, true, 1, 2, 0), ex("b", wire.StateRunning, true, 1, 2, 0)}
	reported := []wire.ExecutionStatus{
		{ExecutionID: "a", State: wire.StateCanceled, Message: wire.LeaseExpiringPrefix + "no heartbeat from a leader for 9.5s (lease 10s)"},
		{ExecutionID: "b", State: wire.StateCanceled, Message: "canceled by the leader"},
	}
	for _, notCounted := range []bool{true, false} {
		res := Reconcile(Input{Executor: "e1", Expected: expected, Reported: reported, BaseIndex: 10,
			StoppedEarly: map[string]bool{"a": notCounted, "b": true}})
		require.Len(t, res.Record, 2)
		require.Equal(t, notCounted, res.Record[0].Fenced, "the lease expiry")
		require.False(t, res.Record[1].Fenced, "another cancel")
	}
	require.True(t, wire.LeaseExpiry(wire.LeaseExpiredPrefix+"no heartbeat from a leader for 10s"))
	require.False(t, wire.LeaseExpiry("exit status 1: lease expired: no heartbeat"), "only at the start")
}
