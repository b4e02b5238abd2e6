package fsm

import (
	"jobmaster/acl"
	"jobmaster/wire"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCodecRoundTripsEveryCommand(t *testing.T) {
	f := Fenced{Token: 7, Time: 1234}
	cmds := []Command{
		&EstablishLeadership{Node: "m1"},
		&SubmitJob{Fenced: f, ID: "a", Spec: parseSpec(t, pipeline)},
		&CancelJob{Fenced: f, ID: "a"},
		&PlaceRegion{Fenced: f, Job: "a", Region: 1, Slots: []SlotAssign{{Group: "g", Index: 2, Executor: "e", Slot: 3}}},
		&ReportExecutions{Fenced: f, Executor: "e", Updates: []ReportUpdate{{ID: "a/v/0/0", State: wire.StateFailed, Message: "exit 1"}}},
		&FailExecutions{Fenced: f, Executor: "e", IDs: []string{"a/v/0/0"}, Reason: "missing"},
		&ExecutorLost{Fenced: f, Executor: "e"},
		&RestartRegions{Fenced: f, Job: "a"},
		&ForgetJobs{Fenced: f, IDs: []string{"a", "b"}},
		&ReportExecutions{Fenced: f, Executor: "e", Updates: []ReportUpdate{{ID: "a/v/0/0", State: wire.StateFinished, Bytes: 42},
			{ID: "a/w/0/0", State: wire.StateFailed, Unavailable: []string{"a/v/0/0"}}}},
		&LosePartitions{Fenced: f, Executor: "e", IDs: []string{"a/v/0/0"}, Reason: "gone"},
		&BootstrapACL{Fenced: f, ACLToken: testToken("a1", "root", acl.Management)},
		&CreateACLToken{Fenced: f, ACLToken: testToken("a2", "ci", acl.Submit)},
		&DeleteACLToken{Fenced: f, AccessorID: "a2"},
		&DrainExecutor{Fenced: f, Executor: "e", DeadlineMs: 30000},
		&DrainExecutor{Fenced: f, Executor: "e", Self: true, Instance: "i1"},
		&UndrainExecutor{Fenced: f, Executor: "e", Instance: "i2"},
		&MoveExecutor{Fenced: f, Executor: "e"},
	}
	entry := MustEncode(cmds...)
	got, err := Decode(entry)
	require.NoError(t, err)
	require.Equal(t, cmds, got)
	for i := 1; i <= int(lastType); i++ {
		require.NotEqual(t, "unknown", CommandType(i).String(), "type %d has a name", i)
	}
}

func TestDecodeRejectsCorruptEntries(t *testing.T) {
	good := MustEncode(&CancelJob{ID: "a"})
	for name, data := range map[string][]byte{
		"unknown type":  {200, 0},
		"short body":    good[:len(good)-1],
		"bad length":    {byte(TypeCancelJob), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"garbage body":  {byte(TypeCancelJob), 2, 0xc1, 0xc1},
		"good then bad": append(append([]byte{}, good...), 9),
	} {
		_, err := Decode(data)
		require.ErrorIs(t, err, ErrCorruptEntry, name)
	}
	// A corrupt entry applies nothing but still advances the index.
	s := NewState()
	rs := s.ApplyEntry(5, []byte{200, 0})
	require.Len(t, rs, 1)
	require.ErrorIs(t, rs[0].Err, ErrCorruptEntry)
	require.Equal(t, uint64(5), s.Index())
}
