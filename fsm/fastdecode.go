package fsm

import (
	"math"

	"jobmaster/wire"
)

// The two commands with the most elements, a placement (one SlotAssign per
// slot of a region) and an executor's report (one ReportUpdate per
// execution), are decoded here by hand: go-msgpack's reflection was a
// seventh of the CPU of placing a region of 10,000 subtasks, paid on
// every master (go run ./bench/cmd/jmprofile -load place -width 10000).
// The bytes are the same go-msgpack/v2 bodies Encode writes; this reads
// the subset of msgpack that encoding produces for these two types (a map
// per struct, strings, integers, arrays, nil) and gives up on anything
// else, which Decode then decodes with go-msgpack as before. What both
// decoders make of the same body is the same value
// (TestPropertyFastDecodeMatchesMsgpack).

// decodeFast decodes body as a command of type t when it is one of the two
// and holds nothing the hand decoder does not know; ok is false otherwise.
func decodeFast(t CommandType, body []byte) (c Command, ok bool) {
	r := mpReader{b: body, ok: true}
	switch t {
	case TypePlaceRegion:
		p := &PlaceRegion{}
		r.place(p)
		c = p
	case TypeReportExecutions:
		p := &ReportExecutions{}
		r.report(p)
		c = p
	default:
		return nil, false
	}
	if !r.ok || len(r.b) != 0 {
		return nil, false
	}
	return c, true
}

// mpReader reads msgpack; any surprise clears ok, after which every read
// returns a zero value.
type mpReader struct {
	b  []byte
	ok bool
}

func (r *mpReader) fail() {
	r.ok = false
	r.b = nil
}

func (r *mpReader) next() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// take returns the next n bytes.
func (r *mpReader) take(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *mpReader) be(n uint64) uint64 {
	var v uint64
	for _, c := range r.take(n) {
		v = v<<8 | uint64(c)
	}
	return v
}

// length reads the length of a map or array; nil is -1. Each element takes
// a byte at least, so a length beyond the bytes left is refused.
func (r *mpReader) length(fix, fixMask, b16, b32 byte) int {
	c := r.next()
	var n uint64
	switch {
	case !r.ok:
		return 0
	case c == 0xc0:
		return -1
	case c&^fixMask == fix:
		n = uint64(c & fixMask)
	case c == b16:
		n = r.be(2)
	case c == b32:
		n = r.be(4)
	default:
		r.fail()
		return 0
	}
	if n > uint64(len(r.b)) {
		r.fail()
		return 0
	}
	return int(n)
}

func (r *mpReader) mapLen() int   { return r.length(0x80, 0x0f, 0xde, 0xdf) }
func (r *mpReader) arrayLen() int { return r.length(0x90, 0x0f, 0xdc, 0xdd) }

// str reads a string: msgpack str, or bin (RawToString).
func (r *mpReader) str() string {
	c := r.next()
	var n uint64
	switch {
	case !r.ok:
		return ""
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n = r.be(1)
	case c == 0xda || c == 0xc5:
		n = r.be(2)
	case c == 0xdb || c == 0xc6:
		n = r.be(4)
	default:
		r.fail()
		return ""
	}
	return string(r.take(n))
}

// bool reads a boolean.
func (r *mpReader) bool() bool {
	switch c := r.next(); {
	case !r.ok:
		return false
	case c == 0xc3:
		return true
	case c == 0xc2:
		return false
	}
	r.fail()
	return false
}

// int64 reads an integer of any msgpack width.
func (r *mpReader) int64() int64 {
	c := r.next()
	switch {
	case !r.ok:
		return 0
	case c <= 0x7f:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	}
	switch c {
	case 0xcc:
		return int64(r.be(1))
	case 0xcd:
		return int64(r.be(2))
	case 0xce:
		return int64(r.be(4))
	case 0xcf:
		v := r.be(8)
		if v > math.MaxInt64 {
			r.fail()
			return 0
		}
		return int64(v)
	case 0xd0:
		return int64(int8(r.be(1)))
	case 0xd1:
		return int64(int16(r.be(2)))
	case 0xd2:
		return int64(int32(r.be(4)))
	case 0xd3:
		return int64(r.be(8))
	}
	r.fail()
	return 0
}

func (r *mpReader) uint64() uint64 {
	if len(r.b) > 0 && r.b[0] == 0xcf {
		r.b = r.b[1:]
		return r.be(8)
	}
	v := r.int64()
	if v < 0 {
		r.fail()
		return 0
	}
	return uint64(v)
}

// int reads an integer that fits an int on every platform a master runs
// on (subtask indexes, slots, region numbers: all far below).
func (r *mpReader) int() int {
	v := r.int64()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail()
		return 0
	}
	return int(v)
}

// fenced reads a field of Fenced (embedded, so its keys are the outer
// struct's); it reports whether key was one.
func (r *mpReader) fenced(key string, f *Fenced) bool {
	switch key {
	case "tok":
		f.Token = r.uint64()
	case "t":
		f.Time = r.int64()
	default:
		return false
	}
	return true
}

func (r *mpReader) place(p *PlaceRegion) {
	for range max(r.mapLen(), 0) {
		k := r.str()
		if r.fenced(k, &p.Fenced) {
			continue
		}
		switch k {
		case "j":
			p.Job = r.str()
		case "r":
			p.Region = r.int()
		case "s":
			n := r.arrayLen()
			if n < 0 {
				p.Slots = nil
				continue
			}
			p.Slots = make([]SlotAssign, n)
			for i := range p.Slots {
				r.slot(&p.Slots[i])
			}
		default:
			r.fail()
		}
	}
}

func (r *mpReader) slot(a *SlotAssign) {
	for range max(r.mapLen(), 0) {
		switch r.str() {
		case "g":
			a.Group = r.str()
		case "i":
			a.Index = r.int()
		case "e":
			a.Executor = r.str()
		case "s":
			a.Slot = r.int()
		default:
			r.fail()
		}
	}
}

func (r *mpReader) report(p *ReportExecutions) {
	for range max(r.mapLen(), 0) {
		k := r.str()
		if r.fenced(k, &p.Fenced) {
			continue
		}
		switch k {
		case "e":
			p.Executor = r.str()
		case "u":
			n := r.arrayLen()
			if n < 0 {
				p.Updates = nil
				continue
			}
			p.Updates = make([]ReportUpdate, n)
			for i := range p.Updates {
				r.update(&p.Updates[i])
			}
		default:
			r.fail()
		}
	}
}

func (r *mpReader) update(u *ReportUpdate) {
	for range max(r.mapLen(), 0) {
		switch r.str() {
		case "id":
			u.ID = r.str()
		case "s":
			u.State = wire.State(r.str())
		case "m":
			u.Message = r.str()
		case "b":
			u.Bytes = r.int64()
		case "f":
			u.Fenced = r.bool()
		case "un":
			n := r.arrayLen()
			if n < 0 {
				u.Unavailable = nil
				continue
			}
			u.Unavailable = make([]string, n)
			for i := range u.Unavailable {
				u.Unavailable[i] = r.str()
			}
		default:
			r.fail()
		}
	}
}
