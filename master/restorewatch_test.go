package master

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A follower whose state has been a restore no leader settled for a
// minute warns, then again a minute later; a restore settled, announced
// only (the cluster id still the old one), or on a leader, does not.
func TestUnsettledRestore(t *testing.T) {
	t0 := time.Unix(1000, 0)
	since, warn := unsettledRestore("new", "new", true, time.Time{}, t0)
	require.False(t, warn)
	require.Equal(t, t0, since)
	since, warn = unsettledRestore("new", "new", true, since, t0.Add(59*time.Second))
	require.False(t, warn)
	since, warn = unsettledRestore("new", "new", true, since, t0.Add(time.Minute))
	require.True(t, warn)
	_, warn = unsettledRestore("new", "new", true, since, t0.Add(90*time.Second))
	require.False(t, warn, "not again before another minute")
	for name, c := range map[string][3]any{
		"settled":                        {"new", "", true},
		"announced, not installed":       {"old", "new", true},
		"a leader, or no leader to know": {"new", "new", false},
	} {
		s, w := unsettledRestore(c[0].(string), c[1].(string), c[2].(bool), t0, t0.Add(time.Hour))
		require.False(t, w, name)
		require.True(t, s.IsZero(), name)
	}
}
