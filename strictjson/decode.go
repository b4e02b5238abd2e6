// Package strictjson decodes the JSON that clients send (job specs,
// request bodies) strictly, with errors a person can act on: exactly one
// value, no unknown field (a near miss gets a "did you mean"), no key
// given twice in one object, valid UTF-8, and every error naming its field
// by a JSON path ("vertices[1].parallelism") and a syntax error by line
// and column. encoding/json alone accepts trailing data after a value
// only through Decoder, keeps the last of two equal keys, replaces
// invalid UTF-8 without a word, and says "json: cannot unmarshal number
// into Go struct field DrainRequest.deadline of type string".
//
// Everything here is pure: bytes in, a value or an *Error out.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Error names the offending field of a document with a JSON path such as
// "vertices[1].parallelism" ("" for the document itself).
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Errorf is an *Error for field.
func Errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Decode decodes data, one JSON value, into v: it refuses unknown fields,
// trailing data, invalid UTF-8 and null for a document, and every error is
// an *Error whose field is a path under prefix (the path of data within a
// larger document; "" for a whole one). doc names what a whole document
// is, for messages: "job spec", "drain request". Keys given twice are
// DuplicateKey's to find (one scan of a whole document).
func Decode(data []byte, v any, prefix, doc string) error {
	if bytes.HasPrefix(data, []byte("\uFEFF")) {
		return &Error{Field: prefix, Msg: fmt.Sprintf("malformed JSON: the %s starts with a byte-order mark (U+FEFF); save it as UTF-8 without one", doc)}
	}
	if !utf8.Valid(data) {
		line, col := lineColumn(data, int64(invalidUTF8At(data))+1)
		return &Error{Field: prefix, Msg: fmt.Sprintf("malformed JSON at line %d, column %d: not UTF-8 (JSON text is UTF-8)", line, col)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		e := jsonError(err, prefix, doc, data)
		if e.Msg == "unknown field" {
			field := e.Field[strings.LastIndexByte(e.Field, '.')+1:]
			if near := SuggestField(v, field); near != "" {
				e.Msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
		}
		return e
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Field: prefix, Msg: "malformed JSON: unexpected data after the value"}
	}
	// null decodes into nothing without an error: say what was wanted.
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		if prefix == "" {
			return &Error{Msg: fmt.Sprintf("a %s is a JSON object, got JSON null", doc)}
		}
		return Errorf(prefix, "want an object, got JSON null")
	}
	return nil
}

// Body decodes a request's body, a whole document (doc names it), into v:
// Decode, and no key given twice (compared whatever their case, as the
// decoder matches them to fields).
func Body(data []byte, v any, doc string) error {
	if err := Decode(data, v, "", doc); err != nil {
		return err
	}
	if field := DuplicateKey(data, nil); field != "" {
		return Errorf(field, "given twice: an object holds a key once")
	}
	return nil
}

// jsonError turns an encoding/json error into a message a user can act on,
// naming fields under prefix; a syntax error is placed by line and column
// in data.
func jsonError(err error, prefix, doc string, data []byte) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var ours *Error
	join := func(f string) string {
		switch {
		case prefix == "":
			return f
		case f == "":
			return prefix
		}
		return prefix + "." + f
	}
	switch {
	case errors.As(err, &ours):
		return &Error{Field: join(ours.Field), Msg: ours.Msg}
	case errors.As(err, &syn):
		line, col := lineColumn(data, syn.Offset)
		return &Error{Field: prefix, Msg: fmt.Sprintf("malformed JSON at line %d, column %d: %v", line, col, syn)}
	case errors.As(err, &typ):
		if typ.Field == "" && prefix == "" {
			return &Error{Msg: fmt.Sprintf("a %s is a JSON object, got JSON %s", doc, Short(typ.Value))}
		}
		return Errorf(join(typ.Field), "want %s, got JSON %s", KindOf(typ.Type), Short(typ.Value))
	case errors.Is(err, io.EOF):
		return &Error{Field: prefix, Msg: "malformed JSON: empty body, want a " + doc}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Field: prefix, Msg: "malformed JSON: unexpected end of input"}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &Error{Field: join(Short(strings.Trim(f, `"`))), Msg: "unknown field"}
	}
	return &Error{Field: prefix, Msg: "malformed " + doc + ": " + strings.TrimPrefix(msg, "json: ")}
}

// Short is a name a client sent, cut to what an error may echo.
func Short(name string) string {
	const most = 64
	if len(name) <= most {
		return name
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%s...(%d bytes)", name[:cut], len(name))
}

// lineColumn places the byte that made a syntax error, which encoding/json
// reports by how many bytes it had read (offset): line and column from 1,
// the column counted in characters.
func lineColumn(data []byte, offset int64) (line, col int) {
	at := int(min(max(offset-1, 0), int64(len(data))))
	before := data[:at]
	start := bytes.LastIndexByte(before, '\n') + 1
	return bytes.Count(before, []byte("\n")) + 1, utf8.RuneCount(before[start:]) + 1
}

// invalidUTF8At is the offset of data's first byte that is not UTF-8.
func invalidUTF8At(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(data)
}

// KindOf names a Go type the way a JSON author thinks of it.
func KindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(KindOf(t.Elem()), "an "), "a ") + "s"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	}
	return t.String()
}
