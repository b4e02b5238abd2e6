package jobspec

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
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
			"vertices[0].command[1]: 131072 bytes, at most 131071 allowed"},
		{"an env value over it",
			`{"vertices":[{"id":"v","parallelism":1,"command":["sh"],"env":{"A":"1","BIG":"` + big + `"}}]}`,
			"vertices[0].env.BIG: 131076 bytes as NAME=value, at most 131071 allowed"},
		{"an env variable whose value fits but NAME=value does not",
			`{"vertices":[{"id":"v","parallelism":1,"command":["sh"],"env":{"BIG":"` + fits[:MaxArgBytes-3] + `"}}]}`,
			"vertices[0].env.BIG: 131072 bytes as NAME=value, at most 131071 allowed"},
		{"an env variable at the limit",
			`{"vertices":[{"id":"v","parallelism":1,"command":["sh"],"env":{"BIG":"` + fits[:MaxArgBytes-4] + `"}}]}`, ""},
		{"an env name over it",
			`{"vertices":[{"id":"v","parallelism":1,"command":["sh"],"env":{"` + big + `":"1"}}]}`,
			"vertices[0].env: a variable name of 131072 bytes, at most 131071 allowed"},
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

// The limit is the kernel's: a process starts with an argument, and with
// an env variable (NAME=value), of MaxArgBytes, and not with one byte
// more.
func TestMaxArgBytesIsWhatAProcessStartsWith(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("MAX_ARG_STRLEN is Linux's")
	}
	run := func(arg, env string) error {
		c := exec.Command("/bin/true", arg)
		c.Env = []string{env}
		return c.Run()
	}
	at, over := strings.Repeat("x", MaxArgBytes), strings.Repeat("x", MaxArgBytes+1)
	require.NoError(t, run(at, "A="+at[2:]))
	require.ErrorIs(t, run(over, "A=1"), syscall.E2BIG)
	require.ErrorIs(t, run("x", "A="+over[2:]), syscall.E2BIG)
}

// A job's name is shown in terminals and pages: control characters (ESC
// clears a screen or retitles a window) are refused at submission, as a
// token's name's are; other text passes.
func TestNameWithoutControlCharacters(t *testing.T) {
	for _, name := range []string{"\x1b[2J", "bell\a", "nul\x00", "line\nbreak", "c1\u0085"} {
		quoted, _ := json.Marshal(name)
		_, err := Parse([]byte(fmt.Sprintf(`{"name":%s,"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`, quoted)))
		require.ErrorContains(t, err, "name: has the control character", "%q", name)
	}
	for _, name := range []string{"invoice‮gnp.exe", "a⁦b", "rlm‏"} {
		quoted, _ := json.Marshal(name)
		_, err := Parse([]byte(fmt.Sprintf(`{"name":%s,"vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`, quoted)))
		require.ErrorContains(t, err, "name: has the bidirectional control character", "%q", name)
	}
	_, err := Parse([]byte(`{"name":"word count — ünïcode ✓ 👩‍💻 עברית","vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`))
	require.NoError(t, err)
}

// A variable's name is shown too (job status, the UI): control and
// bidirectional characters are refused in it at submission; other names
// the task may use pass.
func TestEnvNamesWithoutControlCharacters(t *testing.T) {
	spec := func(name string) []byte {
		quoted, _ := json.Marshal(name)
		return []byte(fmt.Sprintf(`{"vertices":[{"id":"v","parallelism":1,"command":["x"],"env":{%s:"x"}}]}`, quoted))
	}
	_, err := Parse(spec("A\nB"))
	require.EqualError(t, err, `vertices[0].env: variable name "A\nB" has the control character U+000A: a variable name is shown in terminals and pages`)
	_, err = Parse(spec("AB\u202e"))
	require.ErrorContains(t, err, `vertices[0].env: variable name "AB\u202e" has the bidirectional control character U+202E`)
	for _, name := range []string{"PA\u200bTH", "\ufeffPATH", "A\u2028B", "A\u00adB", "A\U000E0041", "PATH\ufe0f", "A\u034fB", "A\u3164B", "A\u115fB", "A\uffa0B"} {
		_, err = Parse(spec(name))
		require.ErrorContains(t, err, "has the invisible character", "%q", name)
	}
	for _, ok := range []string{"A B", "1X", "ü", "lower_case"} {
		_, err := Parse(spec(ok))
		require.NoError(t, err, "%q", ok)
	}
}
