package jobspec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSizeLimits(t *testing.T) {
	big := strings.Repeat("x", MaxArgBytes+1)
	fits := strings.Repeat("x", MaxArgBytes)
	for _, c := range []struct {
		name, spec, err string
	}{
		{"an argument at the limit",
			`{"vertices":[{"id":"v","parallelism":1,"command":["sh","` + fits + `"]}]}`, ""},
		{"an argument over it",
			`{"vertices":[{"id":"v","parallelism":1,"command":["sh","` + big + `"]}]}`,
			"vertices[0].command[1]: 131073 bytes, at most 131072 allowed"},
		{"an env value over it",
			`{"vertices":[{"id":"v","parallelism":1,"command":["sh"],"env":{"A":"1","BIG":"` + big + `"}}]}`,
			"vertices[0].env.BIG: a value of 131073 bytes, at most 131072 allowed"},
		{"an env name over it",
			`{"vertices":[{"id":"v","parallelism":1,"command":["sh"],"env":{"` + big + `":"1"}}]}`,
			"vertices[0].env: a variable name of 131073 bytes, at most 131072 allowed"},
		{"escapes count as sent: 100000 control characters are 600000 bytes",
			`{"vertices":[{"id":"v","parallelism":1,"command":["sh"],"env":{"A":"` + strings.Repeat(`\u0001`, 100000) + `"}}]}`,
			"vertices[0]: the commands and env of vertices[0] to here take 600014 bytes as sent to executors, at most 524288 allowed for the whole job"},
	} {
		_, err := Parse([]byte(c.spec))
		if c.err == "" {
			require.NoError(t, err, c.name)
			continue
		}
		require.EqualError(t, err, c.err, c.name)
	}

	// Over the whole job: five vertices of 120 KiB each.
	var vs []string
	for i := range 5 {
		vs = append(vs, fmt.Sprintf(`{"id":"v%d","parallelism":1,"command":["sh","%s"]}`, i, strings.Repeat("y", 120<<10)))
	}
	_, err := Parse([]byte(`{"vertices":[` + strings.Join(vs, ",") + `]}`))
	require.ErrorContains(t, err, "vertices[4]: the commands and env of vertices[0] to here take")
	require.ErrorContains(t, err, "at most 524288 allowed for the whole job")

	// Normalize alone does not apply them: a spec the log holds still
	// applies.
	s := Spec{Vertices: []Vertex{{ID: "v", Parallelism: 1, Command: []string{"sh", big}}}}
	require.NoError(t, s.Normalize())
}
