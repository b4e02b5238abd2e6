package fsm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
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

// TestACancelledAttemptSaysWhy: an attempt the masters cancelled keeps
// their reason once its executor confirms, not the executor's word that it
// cancelled.
func TestACancelledAttemptSaysWhy(t *testing.T) {
	const confirm = "canceled by the leader" // what an executor says
	message := func(h *harness, id string) string {
		e, ok := h.s.Execution(id)
		require.True(t, ok, id)
		return e.Message
	}
	for _, tt := range []struct {
		name, restart string
		end           func(h *harness)
		want          string
	}{
		{"a sibling failed", `{"strategy":"fixed-delay","attempts":2,"delay":"1s"}`,
			func(h *harness) {
				h.report("e1", ReportUpdate{ID: "j/v/0/0", State: wire.StateFailed, Message: "exit status 3"})
			}, "its region restarts: j/v/0/0 FAILED: exit status 3"},
		{"the job failed", `{"strategy":"none"}`,
			func(h *harness) {
				h.report("e1", ReportUpdate{ID: "j/v/0/0", State: wire.StateFailed, Message: "exit status 3"})
			}, "the job fails: j/v/0/0 FAILED: exit status 3; restart strategy none"},
		{"the user cancelled", `{"strategy":"none"}`,
			func(h *harness) {
				require.NoError(t, h.apply(&CancelJob{Fenced: h.fenced(), ID: "j"}).Err)
			}, "canceled by user"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.submit("j", `{"vertices":[{"id":"v","parallelism":2,"command":["x"]}],"restart":`+tt.restart+`}`)
			h.placeAll("e1")
			h.report("e1", ReportUpdate{ID: "j/v/0/0", State: wire.StateRunning}, ReportUpdate{ID: "j/v/1/0", State: wire.StateRunning})
			tt.end(h)
			require.Equal(t, tt.want, message(h, "j/v/1/0"), "while it is being cancelled")
			h.report("e1", ReportUpdate{ID: "j/v/1/0", State: wire.StateCanceled, Message: confirm})
			require.Equal(t, tt.want, message(h, "j/v/1/0"), "once its executor confirmed")
		})
	}

	// An attempt its executor cancelled on its own (the masters did not
	// ask) says what the executor said.
	h := newHarness(t)
	h.submit("k", `{"vertices":[{"id":"v","parallelism":1,"command":["x"]}],"restart":{"strategy":"none"}}`)
	h.placeAll("e1")
	h.report("e1", ReportUpdate{ID: "k/v/0/0", State: wire.StateCanceled, Message: "killed by the executor's shutdown"})
	require.Equal(t, "killed by the executor's shutdown", message(h, "k/v/0/0"))
}
