package fsm

import (
	"bufio"
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"jobmaster/wire"
)

// TestExecDecoderMatchesTheCodec: what the codec writes for any execution,
// the hand-written decoder reads back equal, consuming exactly that value
// (the codec reads on from the same reader), and the decoder knows every
// field of the layout.
func TestExecDecoderMatchesTheCodec(t *testing.T) {
	require.Equal(t, execFields, reflect.TypeFor[Execution]().NumField()-1, "Execution's fields (less the layout marker) and decodeExecution's")
	str := rapid.OneOf(rapid.Just(""), rapid.StringN(0, 40, -1), rapid.StringN(0, 70000, -1))
	num := rapid.OneOf(rapid.IntRange(-70000, 70000), rapid.Int(), rapid.Just(math.MinInt), rapid.Just(math.MaxInt))
	num64 := rapid.OneOf(rapid.Int64Range(-300, 300), rapid.Int64(), rapid.Just(int64(math.MaxInt64)), rapid.Just(int64(math.MinInt64)))
	unum := rapid.OneOf(rapid.Uint64Range(0, 70000), rapid.Uint64(), rapid.Just(uint64(math.MaxUint64)))
	rapid.Check(t, func(t *rapid.T) {
		e := Execution{ID: str.Draw(t, "id"), Job: str.Draw(t, "job"), Vertex: str.Draw(t, "vertex"),
			VertexIndex: num.Draw(t, "vi"), Subtask: num.Draw(t, "subtask"), Attempt: num.Draw(t, "attempt"),
			State: wire.State(str.Draw(t, "state")), Executor: str.Draw(t, "executor"), Slot: num.Draw(t, "slot"),
			Epoch: unum.Draw(t, "epoch"), Deployed: rapid.Bool().Draw(t, "deployed"),
			DeployIndex: unum.Draw(t, "di"), AckIndex: unum.Draw(t, "ai"),
			DeployTime: num64.Draw(t, "dt"), EndTime: num64.Draw(t, "et"), Message: str.Draw(t, "message"),
			StartTime: num64.Draw(t, "rt")}
		var buf bytes.Buffer
		enc := codec.NewEncoder(&buf, msgpackHandle)
		require.NoError(t, enc.Encode(&e))
		require.NoError(t, enc.Encode(&Tombstone{ID: "after", Next: 3}))
		br := bufio.NewReader(&buf)
		var got Execution
		require.NoError(t, (&execDecoder{r: br}).decodeExecution(&got))
		require.Equal(t, e, got)
		var after Tombstone
		require.NoError(t, codec.NewDecoder(br, msgpackHandle).Decode(&after))
		require.Equal(t, Tombstone{ID: "after", Next: 3}, after)
	})
}

// An execution written before its last fields existed (a shorter array)
// reads with those fields zero; anything else that is not an execution is
// refused, never a panic.
func TestExecDecoderShorterAndBadInput(t *testing.T) {
	type older struct {
		_struct    struct{} `codec:",toarray"` //nolint:unused // msgpack layout marker
		ID, Job, V string
		VI, S, A   int
		State      string
		Executor   string
		Slot       int
		Epoch      uint64
		Deployed   bool
		DI, AI     uint64
		DT, ET     int64
		Message    string
	}
	var buf bytes.Buffer
	require.NoError(t, codec.NewEncoder(&buf, msgpackHandle).Encode(&older{ID: "j/v/0/0", Job: "j", V: "v", State: "RUNNING", Executor: "e1", Slot: 2, Epoch: 7, DT: 5, Message: "m"}))
	var got Execution
	require.NoError(t, (&execDecoder{r: bufio.NewReader(&buf)}).decodeExecution(&got))
	require.Equal(t, Execution{ID: "j/v/0/0", Job: "j", Vertex: "v", State: wire.StateRunning, Executor: "e1", Slot: 2, Epoch: 7, DeployTime: 5, Message: "m"}, got)

	for name, in := range map[string][]byte{
		"empty":          {},
		"a map":          {0x80},
		"too many":       {0xdc, 0x00, 0x20},
		"cut short":      {0x93, 0xa3, 'a'},
		"a huge string":  {0x91, 0xdb, 0xff, 0xff, 0xff, 0xff},
		"a bool for int": {0x94, 0xa0, 0xa0, 0xa0, 0xc3},
		"negative epoch": {0x9a, 0xa0, 0xa0, 0xa0, 0, 0, 0, 0xa0, 0xa0, 0, 0xff},
		"uint64 for int": {0x94, 0xa0, 0xa0, 0xa0, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		err := (&execDecoder{r: bufio.NewReader(bytes.NewReader(in))}).decodeExecution(&got)
		require.Error(t, err, name)
	}
}
