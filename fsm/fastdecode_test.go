package fsm

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"jobmaster/wire"
)

// slowDecode is go-msgpack's decoding of a command body, as Decode did it
// for every command before decodeFast.
func slowDecode(t require.TestingT, c Command, body []byte) Command {
	out := newCommand(c.Type())
	require.NoError(t, codec.NewDecoderBytes(body, msgpackHandle).Decode(out))
	return out
}

// body is the msgpack body Encode writes for c.
func body(t require.TestingT, c Command) []byte {
	frame, err := Encode(nil, c)
	require.NoError(t, err)
	cmds, err := splitFrames(frame)
	require.NoError(t, err)
	return cmds[0]
}

// splitFrames returns the bodies of an entry's frames.
func splitFrames(data []byte) ([][]byte, error) {
	var out [][]byte
	for len(data) > 0 {
		n, k := binary.Uvarint(data[1:])
		out = append(out, data[1+k:1+k+int(n)])
		data = data[1+k+int(n):]
	}
	return out, nil
}

func anyString(t *rapid.T, label string) string {
	// fixstr and str8 here; str16 and str32 in TestFastDecodeWideValues.
	if rapid.IntRange(0, 9).Draw(t, label+"-width") == 0 {
		return strings.Repeat("x", rapid.IntRange(32, 300).Draw(t, label+"-n"))
	}
	return rapid.String().Draw(t, label)
}

func anyInt(t *rapid.T, label string) int {
	return int(rapid.Int32().Draw(t, label))
}

// Whatever a placement or a report holds, the hand decoder and go-msgpack
// make the same command of Encode's body, and Decode takes the hand path.
func TestPropertyFastDecodeMatchesMsgpack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := Fenced{Token: rapid.Uint64().Draw(t, "tok"), Time: rapid.Int64().Draw(t, "time")}
		var c Command
		if rapid.Bool().Draw(t, "place") {
			p := &PlaceRegion{Fenced: f, Job: anyString(t, "job"), Region: anyInt(t, "region")}
			if n := rapid.IntRange(-1, 20).Draw(t, "slots"); n >= 0 {
				p.Slots = make([]SlotAssign, n)
				for i := range p.Slots {
					p.Slots[i] = SlotAssign{Group: anyString(t, "g"), Index: anyInt(t, "i"), Executor: rapid.StringN(0, 8, -1).Draw(t, "e"), Slot: anyInt(t, "s")}
				}
			}
			c = p
		} else {
			p := &ReportExecutions{Fenced: f, Executor: anyString(t, "executor")}
			if n := rapid.IntRange(-1, 18).Draw(t, "updates"); n >= 0 {
				p.Updates = make([]ReportUpdate, n)
				for i := range p.Updates {
					u := ReportUpdate{ID: anyString(t, "id"), State: wire.State(rapid.SampledFrom([]string{"RUNNING", "FINISHED", "FAILED"}).Draw(t, "state")),
						Message: rapid.StringN(0, 40, -1).Draw(t, "m"), Bytes: rapid.Int64().Draw(t, "b"), Fenced: rapid.Bool().Draw(t, "f")}
					if k := rapid.IntRange(-1, 3).Draw(t, "un"); k >= 0 {
						u.Unavailable = make([]string, k)
						for j := range u.Unavailable {
							u.Unavailable[j] = anyString(t, "u")
						}
					}
					p.Updates[i] = u
				}
			}
			c = p
		}
		b := body(t, c)
		fast, ok := decodeFast(c.Type(), b)
		require.True(t, ok, "the hand decoder takes what Encode writes")
		require.Equal(t, slowDecode(t, c, b), fast)
		// Decode of a whole entry goes the same way.
		cmds, err := Decode(MustEncode(c, c))
		require.NoError(t, err)
		require.Equal(t, []Command{fast, fast}, cmds)
	})
}

// A body the hand decoder does not know (another type, a field it has
// never seen, a cut) is left to go-msgpack: Decode's result and error are
// what they always were.
func TestFastDecodeLeavesTheUnknownToMsgpack(t *testing.T) {
	p := &PlaceRegion{Fenced: Fenced{Token: 3, Time: 9}, Job: "j", Slots: []SlotAssign{{Group: "g", Executor: "e1", Slot: 2}}}
	b := body(t, p)
	for n := range len(b) {
		_, ok := decodeFast(TypePlaceRegion, b[:n])
		require.False(t, ok, "cut at %d", n)
	}
	_, ok := decodeFast(TypeSubmitJob, b)
	require.False(t, ok)

	// A field a newer version might add: go-msgpack skips it, so the hand
	// decoder must not guess.
	type newer struct {
		PlaceRegion
		Extra string `codec:"x"`
	}
	var nb []byte
	require.NoError(t, codec.NewEncoderBytes(&nb, msgpackHandle).Encode(&newer{PlaceRegion: *p, Extra: "?"}))
	_, ok = decodeFast(TypePlaceRegion, nb)
	require.False(t, ok)
	frame := append([]byte{byte(TypePlaceRegion)}, binary.AppendUvarint(nil, uint64(len(nb)))...)
	cmds, err := Decode(append(frame, nb...))
	require.NoError(t, err)
	require.Equal(t, []Command{p}, cmds, "decoded by go-msgpack, the unknown field skipped")

	// A corrupt entry is still ErrCorruptEntry.
	frame = append([]byte{byte(TypePlaceRegion)}, binary.AppendUvarint(nil, 2)...)
	_, err = Decode(append(frame, 0x81, 0xc1))
	require.ErrorIs(t, err, ErrCorruptEntry)
}

// The widest msgpack forms, which the property leaves out for its speed:
// str16 and str32, array16 and array32, integers of every width and sign.
func TestFastDecodeWideValues(t *testing.T) {
	p := &PlaceRegion{Fenced: Fenced{Token: 1<<64 - 1, Time: -1 << 62}, Job: strings.Repeat("j", 70_000), Region: -129}
	for i := range 70_000 {
		p.Slots = append(p.Slots, SlotAssign{Group: strings.Repeat("g", i%3*200), Index: []int{i, -i, 1 << 20, -1 << 20, 1<<31 - 1, -1 << 31}[i%6],
			Executor: "e", Slot: i % 1024})
	}
	r := &ReportExecutions{Fenced: Fenced{Token: 255, Time: 65536}, Executor: strings.Repeat("x", 300),
		Updates: []ReportUpdate{{ID: strings.Repeat("i", 1000), State: wire.StateFinished, Bytes: 1 << 40, Unavailable: make([]string, 20)}}}
	for _, c := range []Command{p, r, &PlaceRegion{Slots: p.Slots[:1000]}} {
		b := body(t, c)
		fast, ok := decodeFast(c.Type(), b)
		require.True(t, ok)
		// DeepEqual: a diff of 70,000 slots would take minutes to print.
		require.True(t, reflect.DeepEqual(slowDecode(t, c, b), fast), "%s: the decoders differ", c.Type())
		require.True(t, reflect.DeepEqual(c, fast), "%s: not what was encoded", c.Type())
	}
}
