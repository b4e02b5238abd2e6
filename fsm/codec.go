package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

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

// encoders are reused: a codec encoder is kilobytes of state, and every
// submission is encoded once on its way to the log.
var encoders = sync.Pool{New: func() any {
	var body []byte
	return &bodyEncoder{enc: codec.NewEncoderBytes(&body, msgpackHandle)}
}}

type bodyEncoder struct {
	enc  *codec.Encoder
	body []byte
}

// Encode appends the frame of one command (type byte, uvarint length,
// msgpack body) to buf. An entry of many commands is their frames back to
// back.
func Encode(buf []byte, c Command) ([]byte, error) {
	e := encoders.Get().(*bodyEncoder)
	defer encoders.Put(e)
	e.body = e.body[:0]
	e.enc.ResetBytes(&e.body)
	if err := e.enc.Encode(c); err != nil {
		return buf, fmt.Errorf("encode %s: %w", c.Type(), err)
	}
	buf = append(buf, byte(c.Type()))
	buf = binary.AppendUvarint(buf, uint64(len(e.body)))
	buf = append(buf, e.body...)
	if cap(e.body) > 64<<10 {
		e.body = nil // a large spec's buffer is not kept
	}
	return buf, nil
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
	var dec *codec.Decoder // one for the entry's commands
	for len(data) > 0 {
		t := CommandType(data[0])
		n, k := binary.Uvarint(data[1:])
		if k <= 0 || n > maxFrame || uint64(len(data)-1-k) < n {
			return out, fmt.Errorf("%w: bad frame length", ErrCorruptEntry)
		}
		body := data[1+k : 1+k+int(n)]
		data = data[1+k+int(n):]
		if c, ok := decodeFast(t, body); ok {
			out = append(out, c)
			continue
		}
		c := newCommand(t)
		if c == nil {
			return out, fmt.Errorf("%w: unknown command type %d", ErrCorruptEntry, t)
		}
		if dec == nil {
			dec = codec.NewDecoderBytes(body, msgpackHandle)
		} else {
			dec.ResetBytes(body)
		}
		if err := dec.Decode(c); err != nil {
			return out, fmt.Errorf("%w: %s: %v", ErrCorruptEntry, t, err)
		}
		out = append(out, c)
	}
	return out, nil
}
