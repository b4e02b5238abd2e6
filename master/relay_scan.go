package master

import (
	"encoding/binary"
	"fmt"

	"jobmaster/jobspec"
)

// A relayed batch is scanned before it is decoded. The decoder makes a
// whole value of each element of an array before anything can count
// them: a one-byte empty map becomes a 104-byte jobspec.Vertex, and one
// 6 MiB body of them took a master from 26 MB to 2 GB. scanBatch reads the
// body's headers, allocating nothing, and refuses what no follower sends
// before the decoder makes any of it:
//
//   - more submissions than relayMaxItems, more vertices in a spec than
//     jobspec.MaxVertices, more inputs in a vertex than jobspec.MaxInputs
//     (what Parse refused on the follower);
//   - a batch that, by its counts alone, weighs more than relayMaxBytes as
//     specSize weighs it (each submission, vertex, input, argument and
//     env variable at the least specSize counts for it): the follower
//     fills a batch up to relayMaxBytes, and one spec that Parse took
//     weighs far less on its own;
//   - anything the encoder does not write: a struct that is not a map
//     (the decoder would take an array too), a key or a string that is
//     not a msgpack string, a count larger than the bytes left can hold.
//
// What the decoder makes of a body that passes is then a few times its
// size at most.

// Each element's least weight in specSize.
const (
	scanSubmissionWeight = 64
	scanVertexWeight     = 64
	scanInputWeight      = 32
	scanArgWeight        = 4
	scanEnvWeight        = 8
)

// batchScan reads a body's msgpack values one header at a time.
type batchScan struct {
	data   []byte // what is left
	weight int    // of the batch so far, as specSize counts it
}

// errBatchBound is a bound of the relay that a batch passes.
type errBatchBound struct{ msg string }

func (e *errBatchBound) Error() string { return e.msg }

func boundf(format string, args ...any) error {
	return &errBatchBound{msg: fmt.Sprintf(format, args...)}
}

// scanBatch checks a relayed batch's body before it is decoded: nil, a
// *errBatchBound naming the bound it passes, or another error for a body
// that is malformed.
func scanBatch(data []byte) error {
	s := &batchScan{data: data}
	err := s.object(func(key []byte) error {
		if string(key) != "subs" {
			return s.skip()
		}
		return s.array(relayMaxItems, func(n int) error {
			return boundf("a batch holds 1 to %d submissions, not %d", relayMaxItems, n)
		}, func(i int) error {
			s.weight += scanSubmissionWeight
			return s.submission(i)
		})
	})
	if err != nil {
		return err
	}
	if len(s.data) > 0 {
		return fmt.Errorf("%d bytes after the batch", len(s.data))
	}
	if s.weight > relayMaxBytes {
		return boundf("a batch weighs at most %d bytes (as a follower weighs its submissions), and this one's counts alone weigh %d", relayMaxBytes, s.weight)
	}
	return nil
}

func (s *batchScan) submission(i int) error {
	return s.object(func(key []byte) error {
		if string(key) != "spec" {
			return s.skip()
		}
		return s.object(func(key []byte) error {
			if string(key) != "vertices" {
				return s.skip()
			}
			return s.array(jobspec.MaxVertices, func(n int) error {
				return boundf("submission %d: vertices: %d vertices, at most %d allowed", i, n, jobspec.MaxVertices)
			}, func(j int) error {
				s.weight += scanVertexWeight
				return s.vertex(i, j)
			})
		})
	})
}

func (s *batchScan) vertex(i, j int) error {
	return s.object(func(key []byte) error {
		switch string(key) {
		case "command":
			return s.array(len(s.data), nil, func(int) error {
				s.weight += scanArgWeight
				return s.str()
			})
		case "env":
			return s.env()
		case "inputs":
			return s.array(jobspec.MaxInputs, func(n int) error {
				return boundf("submission %d: vertices[%d].inputs: %d inputs, at most %d allowed (one from each other vertex)", i, j, n, jobspec.MaxInputs)
			}, func(int) error {
				s.weight += scanInputWeight
				return s.object(func([]byte) error { return s.skip() })
			})
		}
		return s.skip()
	})
}

func (s *batchScan) env() error {
	n, err := s.mapHeader("an env")
	if err != nil {
		return err
	}
	for range n {
		s.weight += scanEnvWeight
		if err := s.str(); err != nil {
			return err
		}
		if err := s.str(); err != nil {
			return err
		}
	}
	return nil
}

// mapHeader reads the header of a map, or of nil (0 entries); what names
// the value in errors.
func (s *batchScan) mapHeader(what string) (int, error) {
	kind, n, err := s.header()
	switch {
	case err != nil:
		return 0, err
	case kind == 'n':
		return 0, nil
	case kind != 'm':
		return 0, fmt.Errorf("%s that is not a map", what)
	case n > len(s.data)/2:
		return 0, fmt.Errorf("a map of %d entries in %d bytes", n, len(s.data))
	}
	return n, nil
}

// object reads a struct, a map (or nil), calling field for each key; field
// reads the value.
func (s *batchScan) object(field func(key []byte) error) error {
	n, err := s.mapHeader("a struct")
	if err != nil {
		return err
	}
	for range n {
		kind, n, err := s.header()
		if err != nil {
			return err
		}
		if kind != 's' {
			return fmt.Errorf("a key that is not a string")
		}
		key := s.data[:n]
		s.data = s.data[n:]
		if err := field(key); err != nil {
			return err
		}
	}
	return nil
}

// array reads an array (or nil) of at most most elements (tooMany is the
// error for more; nil where most is no bound below the bytes left),
// calling elem for each.
func (s *batchScan) array(most int, tooMany func(n int) error, elem func(i int) error) error {
	kind, n, err := s.header()
	switch {
	case err != nil:
		return err
	case kind == 'n':
		return nil
	case kind != 'a':
		return fmt.Errorf("a list that is not an array")
	case n > len(s.data): // before most, which may be the bytes there were before the header
		return fmt.Errorf("an array of %d elements in %d bytes", n, len(s.data))
	case n > most:
		return tooMany(n)
	}
	for i := range n {
		if err := elem(i); err != nil {
			return err
		}
	}
	return nil
}

// str reads a string (or nil).
func (s *batchScan) str() error {
	kind, n, err := s.header()
	switch {
	case err != nil:
		return err
	case kind == 's':
		s.data = s.data[n:]
	case kind != 'n':
		return fmt.Errorf("a string that is not a msgpack string")
	}
	return nil
}

// skip reads a value of any kind, and every value within it.
func (s *batchScan) skip() error {
	for left := 1; left > 0; left-- {
		kind, n, err := s.header()
		switch {
		case err != nil:
			return err
		case kind == 'a' || kind == 'm':
			if kind == 'm' {
				n *= 2
			}
			if n > len(s.data) {
				return fmt.Errorf("a container of %d values in %d bytes", n, len(s.data))
			}
			left += n
		case kind == 's':
			s.data = s.data[n:]
		}
	}
	return nil
}

// header reads a value's header: its kind ('a' array, 'm' map, 's' string
// or binary, 'n' nil, 'x' anything else, read whole) and count (elements,
// entries, bytes: a string's bytes are left to read, and are there).
func (s *batchScan) header() (kind byte, n int, err error) {
	if len(s.data) == 0 {
		return 0, 0, fmt.Errorf("the batch ends inside a value")
	}
	b := s.data[0]
	s.data = s.data[1:]
	// size is the bytes of a length that follows, skip those of a
	// scalar's value.
	size, skip := 0, 0
	switch {
	case b <= 0x7f || b >= 0xe0: // fixint
		return 'x', 0, nil
	case b <= 0x8f:
		return 'm', int(b & 0x0f), nil
	case b <= 0x9f:
		return 'a', int(b & 0x0f), nil
	case b <= 0xbf:
		kind, n = 's', int(b&0x1f)
	case b == 0xc0:
		return 'n', 0, nil
	case b == 0xc2 || b == 0xc3:
		return 'x', 0, nil
	case b == 0xc4 || b == 0xd9:
		kind, size = 's', 1
	case b == 0xc5 || b == 0xda:
		kind, size = 's', 2
	case b == 0xc6 || b == 0xdb:
		kind, size = 's', 4
	case b >= 0xc7 && b <= 0xc9: // ext 8, 16, 32: a length, a type, the data
		kind, size = 'x', 1<<(b-0xc7)
	case b == 0xca:
		skip = 4
	case b == 0xcb:
		skip = 8
	case b >= 0xcc && b <= 0xcf:
		skip = 1 << (b - 0xcc)
	case b >= 0xd0 && b <= 0xd3:
		skip = 1 << (b - 0xd0)
	case b >= 0xd4 && b <= 0xd8: // fixext: a type, 1 to 16 bytes
		skip = 1 + 1<<(b-0xd4)
	case b == 0xdc || b == 0xde:
		kind, size = 'a', 2
	case b == 0xdd || b == 0xdf:
		kind, size = 'a', 4
	default: // 0xc1, never used
		return 0, 0, fmt.Errorf("the byte 0x%x begins no value", b)
	}
	if skip > 0 {
		if skip > len(s.data) {
			return 0, 0, fmt.Errorf("the batch ends inside a value")
		}
		s.data = s.data[skip:]
		return 'x', 0, nil
	}
	if size > 0 {
		if size > len(s.data) {
			return 0, 0, fmt.Errorf("the batch ends inside a value")
		}
		var v uint64
		switch size {
		case 1:
			v = uint64(s.data[0])
		case 2:
			v = uint64(binary.BigEndian.Uint16(s.data))
		case 4:
			v = uint64(binary.BigEndian.Uint32(s.data))
		}
		s.data = s.data[size:]
		n = int(v)
		if b == 0xde || b == 0xdf {
			kind = 'm'
		}
	}
	switch {
	case kind == 'x': // an ext: its type byte and its data
		if n+1 > len(s.data) {
			return 0, 0, fmt.Errorf("the batch ends inside a value")
		}
		s.data = s.data[n+1:]
		return 'x', 0, nil
	case kind == 's' && n > len(s.data):
		return 0, 0, fmt.Errorf("%d bytes of a string in %d", n, len(s.data))
	}
	return kind, n, nil
}
