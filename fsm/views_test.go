package fsm

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

// A job's read costs a subtask per subtask, and a subtask's worth per
// 100 bytes of the messages its attempts carry (a message may be escaped
// to six times its bytes in JSON): a job of failures with long messages
// counts for what its answer weighs.
func TestJobReadCostCountsMessages(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices":[{"id":"v","parallelism":10,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":1,"delay":"0s"}}`)
	require.Equal(t, 10, h.s.JobReadCost("j"))
	require.Zero(t, h.s.JobReadCost("nope"))
	h.placeAll("e1")
	msg := strings.Repeat("<", 1000)
	for i := range 10 {
		h.report("e1", ReportUpdate{ID: "j/v/" + string(rune('0'+i)) + "/0", State: wire.StateFailed, Message: msg})
	}
	require.Equal(t, 10+6*10*1000/readUnit, h.s.JobReadCost("j"))
}

// A job's view says how many new slots its region that is ready, and
// not placed, needs at once: what a client says of a job whose later
// region waits for slots.
func TestAJobViewSaysWhatItsReadyRegionNeeds(t *testing.T) {
	h := newHarness(t)
	h.submit("j", `{"vertices": [{"id": "a", "parallelism": 1, "command": ["x"]},
		{"id": "b", "parallelism": 5, "command": ["x"], "inputs": [{"from": "a", "mode": "blocking"}]}]}`)
	require.Equal(t, 1, h.job("j").WaitingSlots, "the first region")
	h.placeRegion("j", 0, "e1")
	require.Zero(t, h.job("j").WaitingSlots, "placed; the second waits for the first")
	h.reportAll("e1", wire.StateRunning)
	h.reportAll("e1", wire.StateFinished)
	require.Equal(t, 5, h.job("j").WaitingSlots, "the second region, its input finished")
	h.placeRegion("j", 1, "e1")
	require.Zero(t, h.job("j").WaitingSlots)
}
