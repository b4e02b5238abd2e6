package jobspec

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// elements is n copies of elem, comma-separated.
func elements(elem string, n int) string {
	return strings.TrimSuffix(strings.Repeat(elem+",", n), ",")
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A megabyte of empty vertices (or inputs) is refused by its count before
// any is decoded: it costs a few times its size, where each "{}," made a
// 104-byte Vertex (decoded twice) and the refusal came after.
func TestTooManyElementsAreRefusedBeforeTheyAreMade(t *testing.T) {
	n := (1<<20 - 100) / 3
	for _, c := range []struct{ name, body, err string }{
		{"vertices", `{"vertices":[` + elements("{}", n) + `]}`,
			fmt.Sprintf("vertices: %d vertices, at most 1000 allowed", n)},
		{"numbers for vertices", `{"vertices":[` + elements("1", n) + `]}`,
			fmt.Sprintf("vertices: %d vertices, at most 1000 allowed", n)},
		{"inputs", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]},{"id":"b","parallelism":1,"command":["x"],"inputs":[` + elements("{}", n) + `]}]}`,
			fmt.Sprintf("vertices[1].inputs: %d inputs, at most 999 allowed (one from each other vertex)", n)},
	} {
		body := []byte(c.body)
		var err error
		bytes := allocated(func() { _, err = Parse(body) })
		require.EqualError(t, err, c.err, c.name)
		require.Less(t, bytes, uint64(8*len(body)), "%s: %d bytes allocated for a body of %d", c.name, bytes, len(body))
	}
}

// The arrays are found as the decoder finds them: keys in any case, with
// escapes, or folded (ſ is s); not in strings, nor elsewhere.
func TestTheArraysCountedAreTheDecodersArrays(t *testing.T) {
	many := "[" + elements("{}", MaxVertices+1) + "]"
	for _, key := range []string{"vertices", "Vertices", "VERTICES", `vertice\u0073`, "verticeſ", `\u0076ertices`} {
		_, err := Parse([]byte(`{"` + key + `":` + many + `}`))
		require.EqualError(t, err, "vertices: 1001 vertices, at most 1000 allowed", key)
	}
	for _, key := range []string{"inputs", "Inputs", `input\u0073`, "inputſ"} {
		_, err := Parse([]byte(`{"vertices":[{"id":"a","parallelism":1,"command":["x"],"` + key + `":` + many + `}]}`))
		require.EqualError(t, err, "vertices[0].inputs: 1001 inputs, at most 999 allowed (one from each other vertex)", key)
	}
	for name, body := range map[string]string{
		"another key":               `{"vertex":` + many + `}`,
		"vertices in a vertex":      `{"vertices":[{"id":"a","parallelism":1,"command":["x"],"vertices":` + many + `}]}`,
		"inputs at the top":         `{"inputs":` + many + `,"vertices":[{"id":"a","parallelism":1,"command":["x"]}]}`,
		"inputs in a resources":     `{"vertices":[{"id":"a","parallelism":1,"command":["x"],"resources":{"inputs":` + many + `}}]}`,
		"in a string":               `{"vertices":[{"id":"a","parallelism":1,"command":["x"],"env":{"A":"\"vertices\":` + strings.ReplaceAll(many, `{}`, `{\"inputs\":[]}`) + `"}}]}`,
		"after an escaped quote":    `{"vertices":[{"id":"a","parallelism":1,"command":["x\\\"","\\\\"],"env":{"vertices\\":"` + many + `"}}]}`,
		"a command of many strings": `{"vertices":[{"id":"a","parallelism":1,"command":[` + elements(`"x"`, 5*MaxVertices) + `]}]}`,
	} {
		_, err := Parse([]byte(body))
		if err != nil {
			require.NotContains(t, err.Error(), "allowed", name)
			require.NotContains(t, err.Error(), "1001", name)
		}
	}
	// A vertex may have an input from each other one.
	var vs []string
	for i := range MaxVertices - 1 {
		vs = append(vs, fmt.Sprintf(`{"id":"v%d","parallelism":1,"command":["x"]}`, i))
	}
	var ins []string
	for i := range MaxVertices - 1 {
		ins = append(ins, fmt.Sprintf(`{"from":"v%d","mode":"blocking"}`, i))
	}
	vs = append(vs, `{"id":"last","parallelism":1,"command":["x"],"inputs":[`+strings.Join(ins, ",")+`]}`)
	s, err := Parse([]byte(`{"vertices":[` + strings.Join(vs, ",") + `]}`))
	require.NoError(t, err)
	require.Len(t, s.Vertices, MaxVertices)
	require.Len(t, s.Vertices[MaxVertices-1].Inputs, MaxInputs)
}

// A body that is not a JSON spec is told what is wrong with it, as
// before the counts, however many elements it seems to have: the counts
// of what is not JSON mean nothing.
func TestWhatIsNotJSONIsNotTooMany(t *testing.T) {
	many := elements("{}", MaxVertices+1)
	for _, c := range []struct{ body, err string }{
		{`{"vertices":[` + many + `]} x`, "malformed JSON: unexpected data after the value"},
		{`{"vertices":[` + many + `,]}`, "malformed JSON at line 1, column 3017: invalid character ']' looking for beginning of value"},
		{`{"vertices":[` + many, "malformed JSON: unexpected end of input"},
		{"{\"name\":\"\xff\",\"vertices\":[" + many + `]}`, "malformed JSON at line 1, column 10: not UTF-8 (JSON text is UTF-8)"},
		{"\uFEFF" + `{"vertices":[` + many + `]}`, "malformed JSON: the job spec starts with a byte-order mark (U+FEFF); save it as UTF-8 without one"},
		{`{"nmae":"x","vertices":[` + many + `]}`, `nmae: unknown field (did you mean "name"?)`},
		{`{"name":1,"vertices":[` + many + `]}`, "name: want a string, got JSON number"},
	} {
		_, err := Parse([]byte(c.body))
		require.EqualError(t, err, c.err, "%.30s", c.body)
		_, naming := parseNaming([]byte(c.body))
		require.EqualError(t, naming, c.err, "what the decoding says: %.30s", c.body)
	}
}

// The count costs nothing of a spec that passes it.
func TestCountingAllocatesNothing(t *testing.T) {
	for name, body := range bigSpecs() {
		require.Zero(t, testing.AllocsPerRun(10, func() { require.NoError(t, tooMany(body)) }), name)
	}
	deep := bytes.Repeat([]byte(`[{"vertices":`), 1<<16)
	require.Zero(t, testing.AllocsPerRun(10, func() { _ = tooMany(deep) }))
}

// Inputs spread over many vertices, each vertex within its bound, are
// counted in all: a megabyte of empty inputs in 348 vertices of 999 each
// made 126 MB. A spec holds at most as many inputs as its bytes allow
// valid ones.
func TestInputsSpreadOverVerticesAreCountedInAll(t *testing.T) {
	v := `{"inputs":[` + elements("{}", MaxInputs) + `]}`
	body := []byte(`{"vertices":[` + elements(v, (1<<20-100)/(len(v)+1)) + `]}`)
	var err error
	b := allocated(func() { _, err = Parse(body) })
	require.ErrorContains(t, err, "inputs in all in a spec of")
	require.Less(t, b, uint64(8*len(body)))

	// As many inputs as valid ones can be, in as few bytes, pass the count.
	in := `{"from":"a"}`
	require.Len(t, in, minInputBytes)
	require.NoError(t, tooMany([]byte(`{"vertices":[{"inputs":[`+elements(in, 50)+`]}]}`)))
}
