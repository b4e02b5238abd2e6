package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"jobmaster/wire"
)

// A snapshot's executions are most of its bytes, and decoding them through
// the reflecting codec was most of a restore. execDecoder reads the array
// layout the codec writes for an Execution (codec:",toarray": its fields
// in order) straight off the snapshot's reader. It reads exactly one value
// per call, so the codec can go on from the same reader afterwards. A
// shorter array (a snapshot written before the last fields were added)
// leaves the missing fields zero, as the codec does.

// execFields is the number of fields of Execution's array layout;
// TestExecDecoderMatchesTheCodec fails when Execution's field list and
// decodeExecution disagree.
const execFields = 17

// maxSnapshotString bounds one string of a snapshot execution: ids, names
// and messages are far shorter.
const maxSnapshotString = 1 << 20

var errExecFormat = errors.New("not an execution as a snapshot writes it")

type execDecoder struct {
	r   *bufio.Reader
	buf []byte
	// names holds the names many executions share (job, vertex, state,
	// executor) as the strings already made for them: executions come
	// sorted by id, so a job's follow each other.
	names map[string]string
}

// maxNames bounds execDecoder.names; past it, names are made afresh.
const maxNames = 1 << 16

// decodeExecution reads one execution into e.
func (d *execDecoder) decodeExecution(e *Execution) (err error) {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	if n > execFields {
		return fmt.Errorf("%w: %d fields, this version knows %d", errExecFormat, n, execFields)
	}
	*e = Execution{}
	var st string
	for i := 0; i < n && err == nil; i++ {
		switch i {
		case 0:
			e.ID, err = d.str(false)
		case 1:
			e.Job, err = d.str(true)
		case 2:
			e.Vertex, err = d.str(true)
		case 3:
			e.VertexIndex, err = d.int()
		case 4:
			e.Subtask, err = d.int()
		case 5:
			e.Attempt, err = d.int()
		case 6:
			st, err = d.str(true)
			e.State = wire.State(st)
		case 7:
			e.Executor, err = d.str(true)
		case 8:
			e.Slot, err = d.int()
		case 9:
			e.Epoch, err = d.uint()
		case 10:
			e.Deployed, err = d.bool()
		case 11:
			e.DeployIndex, err = d.uint()
		case 12:
			e.AckIndex, err = d.uint()
		case 13:
			e.DeployTime, err = d.int64()
		case 14:
			e.EndTime, err = d.int64()
		case 15:
			e.Message, err = d.str(false)
		case 16:
			e.StartTime, err = d.int64()
		}
		if err != nil {
			return fmt.Errorf("field %d: %w", i, err)
		}
	}
	return nil
}

func (d *execDecoder) byte() (byte, error) {
	b, err := d.r.ReadByte()
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return b, err
}

// be reads an n-byte big-endian unsigned number (n is 1, 2, 4 or 8).
func (d *execDecoder) be(n int) (uint64, error) {
	b, err := d.next(n)
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), nil
	}
	return binary.BigEndian.Uint64(b), nil
}

// next returns the next n bytes, valid until the next read.
func (d *execDecoder) next(n int) ([]byte, error) {
	if n <= d.r.Size() {
		b, err := d.r.Peek(n)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		_, _ = d.r.Discard(n)
		return b, nil
	}
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	if _, err := io.ReadFull(d.r, d.buf[:n]); err != nil {
		return nil, err
	}
	return d.buf[:n], nil
}

func (d *execDecoder) arrayLen() (int, error) {
	b, err := d.byte()
	switch {
	case err != nil:
		return 0, err
	case b&0xf0 == 0x90:
		return int(b & 0x0f), nil
	case b == 0xdc:
		n, err := d.be(2)
		return int(n), err
	case b == 0xdd:
		n, err := d.be(4)
		return int(n), err
	}
	return 0, fmt.Errorf("%w: byte %#x where an array begins", errExecFormat, b)
}

// str reads a string; a shared one (a name) is taken from names.
func (d *execDecoder) str(shared bool) (string, error) {
	b, err := d.byte()
	if err != nil {
		return "", err
	}
	var n uint64
	switch {
	case b&0xe0 == 0xa0:
		n = uint64(b & 0x1f)
	case b == 0xd9 || b == 0xc4:
		n, err = d.be(1)
	case b == 0xda || b == 0xc5:
		n, err = d.be(2)
	case b == 0xdb || b == 0xc6:
		n, err = d.be(4)
	case b == 0xc0:
		return "", nil
	default:
		return "", fmt.Errorf("%w: byte %#x where a string begins", errExecFormat, b)
	}
	if err != nil {
		return "", err
	}
	if n > maxSnapshotString {
		return "", fmt.Errorf("%w: a string of %d bytes", errExecFormat, n)
	}
	if n == 0 {
		return "", nil
	}
	p, err := d.next(int(n))
	if err != nil {
		return "", err
	}
	if !shared {
		return string(p), nil
	}
	if s, ok := d.names[string(p)]; ok {
		return s, nil
	}
	s := string(p)
	if d.names == nil {
		d.names = make(map[string]string)
	}
	if len(d.names) < maxNames {
		d.names[s] = s
	}
	return s, nil
}

// number reads any msgpack integer: as a uint64 when it is not negative,
// else as an int64 (neg set).
func (d *execDecoder) number() (u uint64, i int64, neg bool, err error) {
	b, err := d.byte()
	if err != nil {
		return 0, 0, false, err
	}
	switch {
	case b <= 0x7f:
		return uint64(b), 0, false, nil
	case b >= 0xe0:
		return 0, int64(int8(b)), true, nil
	case b == 0xc0:
		return 0, 0, false, nil
	case b >= 0xcc && b <= 0xcf:
		u, err = d.be(1 << (b - 0xcc))
		return u, 0, false, err
	case b >= 0xd0 && b <= 0xd3:
		size := 1 << (b - 0xd0)
		u, err = d.be(size)
		shift := 64 - 8*size
		i = int64(u<<shift) >> shift // sign-extend
		if i >= 0 {
			return uint64(i), 0, false, err
		}
		return 0, i, true, err
	}
	return 0, 0, false, fmt.Errorf("%w: byte %#x where a number begins", errExecFormat, b)
}

func (d *execDecoder) uint() (uint64, error) {
	u, _, neg, err := d.number()
	if err == nil && neg {
		err = fmt.Errorf("%w: a negative number where an unsigned one belongs", errExecFormat)
	}
	return u, err
}

func (d *execDecoder) int64() (int64, error) {
	u, i, neg, err := d.number()
	if err != nil || neg {
		return i, err
	}
	if u > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %d overflows an int64", errExecFormat, u)
	}
	return int64(u), nil
}

func (d *execDecoder) int() (int, error) {
	v, err := d.int64()
	if err == nil && (v > math.MaxInt || v < math.MinInt) {
		err = fmt.Errorf("%w: %d overflows an int", errExecFormat, v)
	}
	return int(v), err
}

func (d *execDecoder) bool() (bool, error) {
	b, err := d.byte()
	switch {
	case err != nil:
		return false, err
	case b == 0xc3:
		return true, nil
	case b == 0xc2 || b == 0xc0:
		return false, nil
	}
	return false, fmt.Errorf("%w: byte %#x where a bool belongs", errExecFormat, b)
}
