package fsm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCancelSaysWhatItFound: a cancel answers the job's status, and
// whether the job was already ending or ended.
func TestCancelSaysWhatItFound(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`)
	r := h.apply(&CancelJob{Fenced: h.fenced(), ID: "j"})
	require.NoError(t, r.Err)
	require.Equal(t, JobCanceled, r.Status, "nothing was placed: canceled at once")
	require.False(t, r.Unchanged)
	r = h.apply(&CancelJob{Fenced: h.fenced(), ID: "j"})
	require.Equal(t, JobCanceled, r.Status)
	require.True(t, r.Unchanged)
}
