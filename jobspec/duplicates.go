package jobspec

import (
	"bytes"
	"strconv"
	"strings"
)

// duplicateKey names the first key that an object of data holds twice, as
// a field path ("vertices[0].env.PATH"), or "" if none does. encoding/json
// keeps the last of them and drops the others without a word, so a spec
// with two "env" objects in a vertex would run with the second only. data
// is a spec that decoded (valid JSON). The decoder matches a struct's
// fields whatever their case ("Name" is "name"), so keys are compared so
// too, but for those of an env object (variables whose names differ in
// case are distinct). It scans the bytes once, on every submission's path:
// a key with an escape in it is compared as written.
func duplicateKey(data []byte) string {
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
			if n := len(stack); n > 0 && stack[n-1].object && len(stack[n-1].keys) > 0 &&
				bytes.EqualFold(stack[n-1].keys[len(stack[n-1].keys)-1], []byte("env")) {
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
			for _, k := range top.keys {
				if bytes.Equal(k, s) || top.fold && bytes.EqualFold(k, s) {
					return keyPath(stack, string(s))
				}
			}
			top.keys = append(top.keys, s)
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

// keyFrame is an object or an array duplicateKey is inside.
type keyFrame struct {
	object    bool
	fold      bool     // keys compared whatever their case
	keys      [][]byte // the object's keys so far
	index     int      // the array's current index
	expectKey bool
}

// keyPath is the field path of key in the innermost object of stack.
func keyPath(stack []*keyFrame, key string) string {
	var b strings.Builder
	for _, f := range stack[:len(stack)-1] {
		if f.object {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(shortName(string(f.keys[len(f.keys)-1])))
		} else {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(shortName(key))
	return b.String()
}
