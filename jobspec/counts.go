package jobspec

import (
	"bytes"
	"fmt"

	"jobmaster/strictjson"
)

// MaxInputs bounds a vertex's inputs: one from each other vertex at most.
const MaxInputs = MaxVertices - 1

// minInputBytes is the fewest bytes a valid input takes: {"from":"a"}.
const minInputBytes = 12

// Arrays are counted before anything is decoded. encoding/json makes a
// whole value of each element of an array before anything can check how
// many there are: "{}," becomes a 104-byte Vertex, or a 48-byte Input, in
// a slice that grows by doubling; a 1 MiB body of 340,000 empty vertices
// made over 600 MB (decoded twice, the second time to name the field at
// fault, then scanned for keys given twice) before Normalize refused the
// count. tooMany counts the elements of those arrays in the bytes,
// allocating nothing, and Parse decodes no vertex of a spec with too many.
// The strings of a vertex's command and env are not counted: they are
// what a legitimate spec is made of, and checkSizes bounds them.

// tooMany is the error for the first array of data with more elements
// than a spec may hold: the top-level object's vertices (more than
// MaxVertices), or a vertex's inputs (more than MaxInputs); nil if there
// is none. Keys name the arrays as the decoder reads them (any case, any
// escapes: strictjson.KeyIs). data may be anything: the counts of a
// document that is not JSON mean nothing, and Parse says what is wrong
// with it instead.
func tooMany(data []byte) error {
	const (
		verticesDepth = 2 // a vertices array is the second container open
		inputsDepth   = 4 // an inputs array the fourth
	)
	// For the containers open at depth 1 to 4: whether each is an object;
	// whether its last key (at 1 and 3) names the array counted below it;
	// whether the array (at 2 and 4) is counted.
	var object, named, counted [inputsDepth + 1]bool
	depth, vertices, inputs, allInputs := 0, 0, 0, 0
	// Inputs over all vertices: each is within its bound, and a thousand
	// vertices of 999 empty inputs each still made a megabyte of empty
	// inputs. A valid input takes at least minInputBytes ({"from":"a"}),
	// so a spec holding more than its bytes allow is invalid, and is
	// refused unmade.
	mostInputs := len(data) / minInputBytes
	for i := 0; i < len(data); {
		c := data[i]
		switch c {
		case ' ', '\t', '\r', '\n', ',', ':':
			i++
			continue
		case '}', ']':
			switch {
			case depth == verticesDepth && counted[depth] && vertices > MaxVertices:
				return fieldErr("vertices", "%d vertices, at most %d allowed", vertices, MaxVertices)
			case depth == inputsDepth && counted[depth] && inputs > MaxInputs:
				return fieldErr(fmt.Sprintf("vertices[%d].inputs", vertices-1),
					"%d inputs, at most %d allowed (one from each other vertex)", inputs, MaxInputs)
			case depth == inputsDepth && counted[depth] && allInputs > mostInputs:
				return fieldErr("vertices", "%d inputs in all in a spec of %d bytes, where an input takes at least %d (%s): at most %d",
					allInputs, len(data), minInputBytes, `{"from":"a"}`, mostInputs)
			}
			depth = max(depth-1, 0)
			i++
			continue
		}
		end := i + 1
		if c == '"' {
			end = stringEnd(data, i)
			if followedByColon(data[end:]) { // a key
				switch {
				case depth == 1 && object[1]:
					named[1] = strictjson.KeyIs(data[i+1:end-1], "vertices")
				case depth == 3 && object[3]:
					named[3] = strictjson.KeyIs(data[i+1:end-1], "inputs")
				}
				i = end
				continue
			}
		}
		// A value starts: an element, if its array is counted.
		switch {
		case depth == verticesDepth && counted[depth]:
			vertices++
		case depth == inputsDepth && counted[depth]:
			inputs++
			allInputs++
		}
		switch c {
		case '{', '[':
			depth++
			if depth <= inputsDepth {
				object[depth], named[depth] = c == '{', false
			}
			switch depth {
			case verticesDepth:
				counted[depth], vertices = c == '[' && object[1] && named[1], 0
			case inputsDepth:
				counted[depth], inputs = c == '[' && counted[verticesDepth] && object[3] && named[3], 0
			}
		case '"':
		default: // a number, true, false or null (or not JSON)
			for end < len(data) && !delimiter(data[end]) {
				end++
			}
		}
		i = end
	}
	return nil
}

// stringEnd is the offset just past the string that starts at data[i] (a
// quote), or len(data) if it does not end: the next quote that no
// backslash escapes (one after an even run of backslashes).
func stringEnd(data []byte, i int) int {
	for j := i + 1; ; j++ {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return len(data)
		}
		j += k
		escaped := false
		for p := j - 1; p > i && data[p] == '\\'; p-- {
			escaped = !escaped
		}
		if !escaped {
			return j + 1
		}
	}
}

// followedByColon reports whether the first byte of rest that is not
// whitespace is a colon: the string before rest was a key.
func followedByColon(rest []byte) bool {
	for _, c := range rest {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == ':'
	}
	return false
}

// delimiter reports whether c ends a number or a literal.
func delimiter(c byte) bool {
	switch c {
	case ',', ':', ']', '}', '{', '[', '"', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}
