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
