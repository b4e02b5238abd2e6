package strictjson

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DuplicateKey names the first key that an object of data holds twice, as
// a field path ("vertices[0].env.PATH"), or "" if none does. encoding/json
// keeps the last of them and drops the others without a word, so a spec
// with two "env" objects in a vertex would run with the second only. data
// is a document that decoded (valid JSON). The decoder matches a struct's
// fields whatever their case ("Name" is "name"), so keys are compared so
// too, but for those of an object that exact names by its key (a map,
// such as a job spec's env: variables whose names differ in case are
// distinct); exact may be nil. It scans the bytes once, on every
// submission's path, and compares keys as the decoder reads them (escapes
// undone).
func DuplicateKey(data []byte, exact func(key string) bool) string {
	var stack []*keyFrame
	done := func() { // a value ended
		if n := len(stack); n > 0 {
			if top := stack[n-1]; top.object {
				top.expectKey = true
			} else {
				top.index++
			}
		}
	}
	for i := 0; i < len(data); {
		switch c := data[i]; c {
		case '{':
			fold := true
			if n := len(stack); n > 0 && stack[n-1].object && exact != nil && exact(stack[n-1].lastKey) {
				fold = false
			}
			stack = append(stack, &keyFrame{object: true, fold: fold, expectKey: true})
			i++
		case '[':
			stack = append(stack, &keyFrame{})
			i++
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			done()
			i++
		case '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			s := data[i+1 : min(j, len(data))]
			i = j + 1
			n := len(stack)
			if n == 0 || !stack[n-1].object || !stack[n-1].expectKey {
				done()
				continue
			}
			top := stack[n-1]
			if top.holds(s) {
				return keyPath(stack, string(s))
			}
			top.expectKey = false
		case ' ', '\t', '\r', '\n', ':', ',':
			i++
		default: // a number, true, false or null
			for i < len(data) && !strings.ContainsRune(",}] \t\r\n", rune(data[i])) {
				i++
			}
			done()
		}
	}
	return ""
}

// keyFrame is an object or an array DuplicateKey is inside.
type keyFrame struct {
	object    bool
	fold      bool     // keys compared whatever their case
	last      []byte   // the object's current key, as written
	lastKey   string   // ... as the decoder reads it
	names     []string // its keys so far, as holds compares them
	seen      map[string]bool
	index     int // the array's current index
	expectKey bool
}

// keysScanned is how many keys an object's are compared with one by one;
// past it they go in a map (an env may hold thousands).
const keysScanned = 8

// holds reports whether the object has key raw already, and notes it:
// keys are compared as the decoder reads them (escapes undone; case folded
// unless the object is an env).
func (f *keyFrame) holds(raw []byte) bool {
	f.last = raw
	key := string(raw)
	if bytes.IndexByte(raw, '\\') >= 0 {
		var s string
		if json.Unmarshal([]byte(`"`+key+`"`), &s) == nil {
			key = s
		}
	}
	f.lastKey = key
	if f.fold {
		key = foldKey(key)
	}
	if f.seen == nil && len(f.names) < keysScanned {
		for _, k := range f.names {
			if k == key {
				return true
			}
		}
		f.names = append(f.names, key)
		return false
	}
	if f.seen == nil {
		f.seen = make(map[string]bool, 2*keysScanned)
		for _, k := range f.names {
			f.seen[k] = true
		}
	}
	if f.seen[key] {
		return true
	}
	f.seen[key] = true
	return false
}

// foldKey is key as the decoder matches it to a field, whatever its case:
// two keys it takes for one field (bytes.EqualFold: "Name" and "name",
// "verticeſ" and "vertices") fold to one string. Each character becomes
// the least of its Unicode case-folding orbit.
func foldKey(key string) string {
	ascii := true
	for i := 0; i < len(key) && ascii; i++ {
		ascii = key[i] < utf8.RuneSelf
	}
	if ascii {
		return strings.ToUpper(key)
	}
	var b strings.Builder
	for _, r := range key {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// keyPath is the field path of key in the innermost object of stack.
func keyPath(stack []*keyFrame, key string) string {
	var b strings.Builder
	for _, f := range stack[:len(stack)-1] {
		if f.object {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(Short(string(f.last)))
		} else {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(Short(key))
	return b.String()
}
