package executor

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

func TestLeaseExpired(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		now  time.Time
		want bool
	}{
		{"just renewed", t0, false},
		{"within the lease", t0.Add(9 * time.Second), false},
		{"one nanosecond short", t0.Add(10*time.Second - 1), false},
		{"exactly the lease", t0.Add(10 * time.Second), true},
		{"thawed long after (SIGSTOP)", t0.Add(time.Hour), true},
		{"clock went backwards", t0.Add(-time.Hour), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, leaseExpired(t0, tc.now, 10*time.Second))
		})
	}
}

func TestLeaseFiresOncePerRenewal(t *testing.T) {
	clock := newFakeClock()
	l := lease{dur: time.Second}
	l.renew(clock.Now())
	require.False(t, l.check(clock.Now()))
	clock.Advance(999 * time.Millisecond)
	require.False(t, l.check(clock.Now()))
	clock.Advance(time.Millisecond)
	require.True(t, l.check(clock.Now()), "expiry is seen")
	clock.Advance(time.Hour)
	require.False(t, l.check(clock.Now()), "and acted on once")
	l.renew(clock.Now())
	require.False(t, l.check(clock.Now()))
	clock.Advance(2 * time.Second)
	require.True(t, l.check(clock.Now()), "a renewed lease expires again")
}

func TestLeaseMessage(t *testing.T) {
	require.Equal(t, "lease expired: no heartbeat from a leader for 10s", leaseMessage(10*time.Second, 10*time.Second, 0))
	require.Equal(t, "lease expiring: no heartbeat from a leader for 6.5s (lease 10s)", leaseMessage(6500*time.Millisecond, 10*time.Second, 500*time.Millisecond))
	require.Equal(t, "lease expired: no heartbeat from a leader for 14s (lease 10s)", leaseMessage(14*time.Second, 10*time.Second, 2*time.Second))
	// The executor's own checks did not run for 12s: it was held up.
	require.Equal(t, "lease expired: this executor was held up (stopped or starved) for 12s, and no heartbeat from a leader reached it for 12.6s (lease 10s)",
		leaseMessage(12600*time.Millisecond, 10*time.Second, 12*time.Second))
	require.Equal(t, "lease expiring: this executor was held up (stopped or starved) for 7s, and no heartbeat from a leader reached it for 7s (lease 10s)",
		leaseMessage(7*time.Second, 10*time.Second, 7*time.Second), "stopped at the fence time, before the lease ran out")
	require.Equal(t, 500*time.Millisecond, leaseTick(10*time.Second))
}

func TestConfigKeepsTasksWithinTheLease(t *testing.T) {
	c, err := Config{NodeID: "e", DataDir: "d", HTTPAddr: "a:1"}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 6500*time.Millisecond, c.fenceAfter(), "10s lease - 3s grace - 0.5s to kill")
	_, err = Config{NodeID: "e", DataDir: "d", HTTPAddr: "a:1", Lease: 2900 * time.Millisecond, CancelGrace: 2 * time.Second}.withDefaults()
	require.ErrorContains(t, err, "lease 2.9s is too short for a cancel grace of 2s")
	c, err = Config{NodeID: "e", DataDir: "d", HTTPAddr: "a:1", Runtime: RuntimeSim, Lease: time.Second, CancelGrace: 5 * time.Second}.withDefaults()
	require.NoError(t, err, "simulated tasks stop at once: any lease will do")
	require.Equal(t, time.Second, c.fenceAfter())
}

// A task whose start waits for its inputs, deployed while the lease was
// good, does not start once the lease has run out while it waited: the
// leader may have placed the attempt elsewhere. It ends CANCELED with the
// lease's message.
func TestATaskWaitingForInputsDoesNotStartOnceTheLeaseRanOut(t *testing.T) {
	release := make(chan struct{})
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Trailer", wire.HeaderEnd)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("x"))
		w.Header().Set(wire.HeaderEnd, wire.EndComplete)
	}))
	defer src.Close()
	defer close(release)

	clock := newFakeClock()
	e := startExecutor(t, Config{Lease: time.Hour, Now: clock.Now})
	l := newLeader(t, e, 1)
	l.heartbeat()

	c := simTask("j", 0, 10*time.Hour, 0)
	c.Env[SimFetchEnv] = "true"
	c.Inputs = []wire.Input{{Vertex: "p", Mode: wire.ModeBlocking, Sources: []wire.Source{
		{Subtask: 0, Execution: "j/p/0/0", Executor: "e9", Addr: strings.TrimPrefix(src.URL, "http://")}}}}
	require.Equal(t, wire.StateDeploying, l.deploy(c).Executions[0].State)

	clock.Advance(61 * time.Minute) // the lease runs out: nothing may start now
	release <- struct{}{}           // the input arrives

	var st wire.ExecutionStatus
	waitFor(t, "the task to end", func() bool {
		st, _ = status(l.executions().Executions, c.ExecutionID)
		return st.State.Terminal() || st.State == wire.StateRunning
	})
	require.Equal(t, wire.StateCanceled, st.State, "started after the lease ran out: %+v", st)
	require.Contains(t, st.Message, wire.LeaseExpiredPrefix)
}
