package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestScheduleIsReplayableAndCoversEveryKind(t *testing.T) {
	a := Schedule(42, AllFaults, 50, 3*time.Second)
	b := Schedule(42, AllFaults, 50, 3*time.Second)
	require.Equal(t, a, b, "the same seed gives the same schedule")
	require.NotEqual(t, a, Schedule(43, AllFaults, 50, 3*time.Second))

	first := map[FaultKind]bool{}
	for _, f := range a[:len(AllFaults)] {
		first[f.Kind] = true
	}
	require.Len(t, first, len(AllFaults), "every kind once before any repeats")
	for _, f := range a {
		r := holdRange[f.Kind]
		require.GreaterOrEqual(t, f.Hold, r[0])
		require.LessOrEqual(t, f.Hold, r[1])
		require.LessOrEqual(t, f.Pause, 3*time.Second)
	}

	// Without namespaces the partition kinds are left out.
	var kinds []FaultKind
	for _, k := range AllFaults {
		if !k.NeedsNetns() {
			kinds = append(kinds, k)
		}
	}
	for _, f := range Schedule(7, kinds, 30, time.Second) {
		require.False(t, f.Kind.NeedsNetns(), f.Kind)
	}
	require.Len(t, Schedule(7, kinds, len(kinds), time.Second), len(kinds))
}

func TestGenJobIsReplayable(t *testing.T) {
	// The same seed submits the same jobs (the checker's expectations are
	// part of what is replayed).
	for _, seed := range []uint64{1, 2} {
		r1, r2 := newRand(seed), newRand(seed)
		for i := 0; i < 20; i++ {
			s1, j1 := genJob(r1, "j")
			s2, j2 := genJob(r2, "j")
			require.Equal(t, s1, s2)
			require.Equal(t, j1, j2)
		}
	}
}
