package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// msgpackHandle encodes maps with sorted keys so that equal states encode to
// equal bytes (the state hash depends on it).
var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.Canonical = true
	h.WriteExt = true
	h.RawToString = true
	return h
}()

// maxFrame bounds one command's body; a job spec is at most 1 MiB of JSON.
const maxFrame = 64 << 20

// Encode appends the frame of one command (type byte, uvarint length,
// msgpack body) to buf. An entry of many commands is their frames back to
// back.
func Encode(buf []byte, c Command) ([]byte, error) {
	var body []byte
	if err := codec.NewEncoderBytes(&body, msgpackHandle).Encode(c); err != nil {
		return buf, fmt.Errorf("encode %s: %w", c.Type(), err)
	}
	buf = append(buf, byte(c.Type()))
	buf = binary.AppendUvarint(buf, uint64(len(body)))
	return append(buf, body...), nil
}

// MustEncode encodes commands into one entry and panics on failure; for
// tests and for commands built from already-validated values.
func MustEncode(cmds ...Command) []byte {
	var buf []byte
	for _, c := range cmds {
		var err error
		if buf, err = Encode(buf, c); err != nil {
			panic(err)
		}
	}
	return buf
}

// ErrCorruptEntry means a log entry did not decode; it is never produced by
// this package's encoder.
var ErrCorruptEntry = errors.New("corrupt log entry")

// Decode splits an entry into its commands.
func Decode(data []byte) ([]Command, error) {
	var out []Command
	for len(data) > 0 {
		t := CommandType(data[0])
		n, k := binary.Uvarint(data[1:])
		if k <= 0 || n > maxFrame || uint64(len(data)-1-k) < n {
			return out, fmt.Errorf("%w: bad frame length", ErrCorruptEntry)
		}
		body := data[1+k : 1+k+int(n)]
		data = data[1+k+int(n):]
		c := newCommand(t)
		if c == nil {
			return out, fmt.Errorf("%w: unknown command type %d", ErrCorruptEntry, t)
		}
		if err := codec.NewDecoderBytes(body, msgpackHandle).Decode(c); err != nil {
			return out, fmt.Errorf("%w: %s: %v", ErrCorruptEntry, t, err)
		}
		out = append(out, c)
	}
	return out, nil
}
