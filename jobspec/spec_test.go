package jobspec

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"jobmaster/internal/densespec"
)

const valid = `{
  "name": "wordcount",
  "vertices": [
    {"id": "split", "parallelism": 4, "command": ["sh", "-c", "true"], "env": {"K": "V"}},
    {"id": "count", "parallelism": 2, "command": ["./count"],
     "inputs": [{"from": "split", "mode": "blocking"}], "slot_sharing_group": "default"}
  ],
  "restart": {"strategy": "fixed-delay", "attempts": 3, "delay": "1s"},
  "failover": "region"
}`

func TestParseValid(t *testing.T) {
	s, err := Parse([]byte(valid))
	require.NoError(t, err)
	require.Equal(t, "wordcount", s.Name)
	require.Equal(t, 6, s.TotalSubtasks())
	require.Equal(t, Duration(time.Second), s.Restart.Delay)
	require.Equal(t, 3, s.Restart.Attempts)
	require.Equal(t, ModeBlocking, s.Vertices[1].Inputs[0].Mode)
}

func TestParseDefaults(t *testing.T) {
	s, err := Parse([]byte(`{"vertices":[{"id":"a","parallelism":1,"command":["true"]},
		{"id":"b","parallelism":1,"command":["true"],"inputs":[{"from":"a"}]}]}`))
	require.NoError(t, err)
	require.Equal(t, FailoverRegion, s.Failover)
	require.Equal(t, &Restart{Strategy: StrategyFixedDelay, Attempts: DefaultFixedDelayAttempts, Delay: DefaultRestartDelay}, s.Restart)
	require.Equal(t, ModePipelined, s.Vertices[1].Inputs[0].Mode)
	require.Equal(t, DefaultSlotSharingGroup, s.Vertices[0].SlotSharingGroup)

	// Normalizing twice changes nothing: specs meaning the same compare equal.
	again := *s
	require.NoError(t, again.Normalize())
	require.Equal(t, s, &again)

	s, err = Parse([]byte(`{"vertices":[{"id":"a","parallelism":1,"command":["true"]}],
		"restart":{"strategy":"fixed-delay","attempts":0}}`))
	require.NoError(t, err)
	require.Equal(t, 0, s.Restart.Attempts, "an explicit 0 means no restarts")

	s, err = Parse([]byte(`{"vertices":[{"id":"a","parallelism":1,"command":["true"]}],
		"restart":{"strategy":"exponential-delay"}}`))
	require.NoError(t, err)
	require.Equal(t, DefaultJitter, s.Restart.Jitter)
	require.Equal(t, DefaultMaxDelay, s.Restart.MaxDelay)
	s, err = Parse([]byte(`{"vertices":[{"id":"a","parallelism":1,"command":["true"]}],
		"restart":{"strategy":"exponential-delay","jitter":0}}`))
	require.NoError(t, err)
	require.Equal(t, 0.0, s.Restart.Jitter, "an explicit 0 means no jitter")
}

func TestParseErrors(t *testing.T) {
	v := func(extra string) string {
		return `{"vertices":[{"id":"a","parallelism":1,"command":["true"]}` + extra + `]}`
	}
	cases := []struct {
		name, body, want string
	}{
		{"malformed", `{"vertices": [`, "malformed JSON"},
		{"empty", ``, "empty body"},
		{"not an object", `[1,2]`, "a job spec is a JSON object, got JSON array"},
		{"null", ` null `, "a job spec is a JSON object, got JSON null"},
		{"null vertex", `{"vertices":[null]}`, "vertices[0]: want an object, got JSON null"},
		{"trailing", v("") + `{}`, "unexpected data after"},
		{"unknown field", `{"vertices":[],"bogus":1}`, "bogus: unknown field"},
		{"unknown vertex field", `{"vertices":[{"id":"a","parallelism":1,"command":["x"],"paralelism":2}]}`, "paralelism: unknown field"},
		{"no vertices", `{"vertices":[]}`, "vertices: a job needs at least one vertex"},
		{"wrong type", `{"vertices":[{"id":"a","parallelism":"x","command":["x"]}]}`, "vertices[0].parallelism: want an integer, got JSON string"},
		{"wrong type in the second vertex", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]},{"id":"b","parallelism":1,"command":"x"}]}`, "vertices[1].command: want an array of strings, got JSON string"},
		{"wrong restart type", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":"3"}}`, "restart.attempts: want an integer, got JSON string"},
		{"restart not an object", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"restart":"fixed-delay"}`, "restart: want an object"},
		{"parallelism 0", `{"vertices":[{"id":"a","parallelism":0,"command":["x"]}]}`, "vertices[0].parallelism: must be between 1 and 10000, got 0"},
		{"parallelism too big", `{"vertices":[{"id":"a","parallelism":10001,"command":["x"]}]}`, "vertices[0].parallelism"},
		{"empty command", `{"vertices":[{"id":"a","parallelism":1,"command":[]}]}`, "vertices[0].command: must name a program"},
		{"missing id", `{"vertices":[{"parallelism":1,"command":["x"]}]}`, "vertices[0].id: must not be empty"},
		{"slash in id", `{"vertices":[{"id":"a/b","parallelism":1,"command":["x"]}]}`, "vertices[0].id"},
		{"duplicate", v(`,{"id":"a","parallelism":1,"command":["x"]}`), `vertices[1].id: duplicate vertex id "a"`},
		{"unknown edge", v(`,{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"zz"}]}`), `vertices[1].inputs[0].from: unknown vertex "zz"`},
		{"self edge", `{"vertices":[{"id":"a","parallelism":1,"command":["x"],"inputs":[{"from":"a"}]}]}`, "cycle"},
		{"cycle", `{"vertices":[{"id":"a","parallelism":1,"command":["x"],"inputs":[{"from":"c"}]},
			{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a"}]},
			{"id":"c","parallelism":1,"command":["x"],"inputs":[{"from":"b","mode":"blocking"}]}]}`, "vertices: the job graph has a cycle"},
		{"bad mode", v(`,{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","mode":"push"}]}`), `vertices[1].inputs[0].mode`},
		{"bad distribution", v(`,{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","distribution":"hash"}]}`), `vertices[1].inputs[0].distribution: must be "all-to-all" or "forward", got "hash"`},
		{"empty distribution", v(`,{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","distribution":""}]}`),
			`vertices[1].inputs[0].distribution: must be "all-to-all" or "forward", got "" (leave it out for "all-to-all")`},
		{"empty mode", v(`,{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","mode":""}]}`),
			`vertices[1].inputs[0].mode: must be "pipelined" or "blocking", got "" (leave it out for "pipelined")`},
		{"distribution not a string", v(`,{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","distribution":5}]}`),
			`vertices[1].inputs[0].distribution: want a string, got JSON number`},
		{"unknown input field", v(`,{"id":"b","parallelism":1,"command":["x"],"inputs":[{"from":"a","kind":"x"}]}`),
			`vertices[1].inputs[0].kind: unknown field`},
		{"forward with unequal parallelism", v(`,{"id":"b","parallelism":2,"command":["x"],"inputs":[{"from":"a","distribution":"forward"}]}`),
			`vertices[1].inputs[0].distribution: a forward edge needs equal parallelism on both sides: "a" has 1, "b" has 2`},
		{"NUL in an argument", `{"vertices":[{"id":"a","parallelism":1,"command":["sh","-c","echo a\u0000b"]}]}`, "vertices[0].command[2]: contains a NUL byte"},
		{"NUL in the program", `{"vertices":[{"id":"a","parallelism":1,"command":["tr\u0000ue"]}]}`, "vertices[0].command[0]: contains a NUL byte"},
		{"reserved env", `{"vertices":[{"id":"a","parallelism":1,"command":["x"],"env":{"JOBMASTER_JOB_ID":"x"}}]}`, "JOBMASTER_ variables"},
		{"bad failover", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"failover":"some"}`, "failover: must be"},
		{"bad strategy", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"restart":{"strategy":"sometimes"}}`, `restart.strategy: unknown strategy "sometimes"`},
		{"bad delay", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"restart":{"strategy":"fixed-delay","delay":"soon"}}`, `restart.delay: invalid duration "soon"`},
		{"unused param", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"restart":{"strategy":"none","attempts":2}}`, `restart.attempts: not used by strategy "none"`},
		{"unknown restart field", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"restart":{"strategy":"none","tries":2}}`, `restart.tries: unknown field`},
		{"a misspelt field is named", `{"vertices":[{"id":"a","paralelism":1,"command":["x"]}]}`, `vertices[0].paralelism: unknown field (did you mean "parallelism"?)`},
		{"a vertex is not told of an input's fields", `{"vertices":[{"id":"a","parallelism":1,"command":["x"],"mod":"blocking"}]}`, `vertices[0].mod: unknown field`},
		{"a misspelt restart field is named", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"restart":{"strategy":"none","atempts":2}}`, `restart.atempts: unknown field (did you mean "attempts"?)`},
		{"negative attempts", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"restart":{"strategy":"fixed-delay","attempts":-1}}`, `restart.attempts: must not be negative`},
		{"jitter", `{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"restart":{"strategy":"exponential-delay","jitter":2}}`, `restart.jitter`},
		{"too many subtasks", `{"vertices":[` + strings.Repeat(`{"id":"x","parallelism":10000,"command":["x"]},`, 0) + manyVertices(11) + `]}`, "subtasks in all"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.body))
			require.Error(t, err)
			require.IsType(t, &Error{}, err)
			require.Contains(t, err.Error(), c.want)
		})
	}
}

func manyVertices(n int) string {
	var parts []string
	for i := 0; i < n; i++ {
		parts = append(parts, `{"id":"v`+string(rune('a'+i))+`","parallelism":10000,"command":["x"]}`)
	}
	return strings.Join(parts, ",")
}

func TestDurationJSONRoundTrip(t *testing.T) {
	b, err := Duration(1500 * time.Millisecond).MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, `"1.5s"`, string(b))
	var d Duration
	require.NoError(t, d.UnmarshalJSON(b))
	require.Equal(t, Duration(1500*time.Millisecond), d)
}

// TestDistributionNormalized: all-to-all, given or not, is the same spec;
// forward stays.
func TestDistributionNormalized(t *testing.T) {
	spec := func(dist string) *Spec {
		in := `{"from":"a"}`
		if dist != "" {
			in = `{"from":"a","distribution":"` + dist + `"}`
		}
		s, err := Parse([]byte(`{"vertices":[{"id":"a","parallelism":2,"command":["x"]},{"id":"b","parallelism":2,"command":["x"],"inputs":[` + in + `]}]}`))
		require.NoError(t, err)
		return s
	}
	require.Equal(t, spec(""), spec("all-to-all"))
	require.True(t, spec("forward").Vertices[1].Inputs[0].Forward())
	require.False(t, spec("").Vertices[1].Inputs[0].Forward())
	require.NotEqual(t, spec(""), spec("forward"))
}

// TestMalformedJSONIsPlacedByLineAndColumn: a syntax error names the line
// and column of the byte that broke it, not a byte offset.
func TestMalformedJSONIsPlacedByLineAndColumn(t *testing.T) {
	for _, c := range []struct {
		spec, want string
	}{
		{"{\n  \"name\": \"x\",\n  \"vertices\": [}\n}", "malformed JSON at line 3, column 16: invalid character '}' looking for beginning of value"},
		{`{"name": "é" "vertices": []}`, "malformed JSON at line 1, column 14: invalid character '\"' after object key:value pair"},
		{"x", "malformed JSON at line 1, column 1: invalid character 'x' looking for beginning of value"},
	} {
		_, err := Parse([]byte(c.spec))
		require.Error(t, err)
		require.Equal(t, c.want, err.Error(), "%q", c.spec)
	}
}

// Whenever the one-pass parse accepts a spec, the parse that names errors
// accepts it too, as the same spec; and it takes the common specs.
func FuzzParseFastIsParseNaming(f *testing.F) {
	for _, seed := range []string{
		valid,
		`{"vertices":[{"id":"a","parallelism":1,"command":["true"]}]}`,
		`{"vertices":[{"id":"a","parallelism":2,"command":["x"],"env":{"A":"1"},"resources":{"cpu_millis":100,"memory_mb":64}},
			{"id":"b","parallelism":2,"command":["y","z"],"inputs":[{"from":"a","mode":"blocking","distribution":"forward"}],"slot_sharing_group":"g"}],
			"restart":{"strategy":"exponential-delay","initial_delay":"1s","max_delay":"5s","multiplier":2,"jitter":0},"failover":"full","name":"n"}`,
		`{"vertices":[null]}`,
		`{"vertices":[{"id":"a","parallelism":1,"command":["x"]}],"restart":null}`,
		`{"vertices":[{"id":"a","parallelism":1,"command":["x"],"env":null,"inputs":null,"resources":null}]}`,
		`{"vertices":[{"id":"a","parallelism":1,"command":["x"]}]} {}`,
		`{"vertices":[{"id":"a","parallelism":1,"command":["x"],"inputs":[null]}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := parseFast(data)
		naming, err := parseNaming(data)
		if !ok {
			return
		}
		require.NoError(t, err, "the one-pass parse accepted %q", data)
		require.Equal(t, naming, fast)
	})
}

func TestParseFastTakesTheCommonSpecs(t *testing.T) {
	for _, body := range []string{valid, `{"name":"bench","vertices":[{"id":"v","parallelism":1,"command":["/bin/true"]}]}`} {
		_, ok := parseFast([]byte(body))
		require.True(t, ok, body)
	}
}

// A long unknown name is no misspelling: it is not compared with every
// field (that costs the product of the lengths), and gets no suggestion.
func TestALongUnknownFieldGetsNoSuggestion(t *testing.T) {
	long := strings.Repeat("parallelism", 1000)
	_, err := Parse([]byte(`{"vertices":[{"id":"a","parallelism":1,"command":["x"],"` + long + `":1}]}`))
	require.EqualError(t, err, "vertices[0]."+long[:64]+"...(11000 bytes): unknown field", "and is not echoed whole")
}

// A key given twice in one object is refused, named by its path; the
// same key in different objects is not a duplicate.
func TestKeysGivenTwiceAreRefused(t *testing.T) {
	for spec, field := range map[string]string{
		`{"name":"a","name":"b","vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`:                                              "name",
		`{"vertices":[{"id":"v","parallelism":1,"command":["x"]}],"vertices":[{"id":"w","parallelism":1,"command":["x"]}]}`:            "vertices",
		`{"vertices":[{"id":"v","parallelism":1,"command":["x"]},{"id":"w","parallelism":1,"command":["x"],"env":{"A":"1","A":"2"}}]}`: "vertices[1].env.A",
		`{"vertices":[{"id":"v","parallelism":1,"command":["x"],"parallelism":2}]}`:                                                    "vertices[0].parallelism",
		`{"name":"a","Name":"b","vertices":[{"id":"v","parallelism":1,"command":["x"]}]}`:                                              "Name",
	} {
		_, err := Parse([]byte(spec))
		require.EqualError(t, err, field+": given twice: an object holds a key once (the decoder would keep the last and drop the others)", spec)
	}
	_, err := Parse([]byte(`{"name":"x","vertices":[{"id":"v","parallelism":1,"command":["x"],"env":{"id":"v","name":"n","A":"1","a":"2"}},{"id":"w","parallelism":1,"command":["id","id"]}]}`))
	require.NoError(t, err)
}

// A key given twice is said first, even when the spec is wrong otherwise
// too: the second "vertices" (empty) is what made it so.
func TestAKeyGivenTwiceIsSaidBeforeWhatFollowsFromIt(t *testing.T) {
	_, err := Parse([]byte(`{"vertices":[{"id":"v","parallelism":1,"command":["x"]}],"vertices":[]}`))
	require.EqualError(t, err, "vertices: given twice: an object holds a key once (the decoder would keep the last and drop the others)")
	_, err = Parse([]byte(`{"vertices":[],"vertices":[]`))
	require.ErrorContains(t, err, "unexpected end of input", "malformed JSON is said as such")
}

// A spec is UTF-8: invalid bytes are refused where they are (the decoder
// would put U+FFFD in their place), and a byte-order mark is named.
func TestASpecIsUTF8(t *testing.T) {
	_, err := Parse([]byte("{\"vertices\":[{\"id\":\"v\",\"parallelism\":1,\"command\":[\"echo\",\"\xff\"]}]}"))
	require.EqualError(t, err, "malformed JSON at line 1, column 59: not UTF-8 (JSON text is UTF-8)")
	_, err = Parse([]byte("\uFEFF" + valid))
	require.ErrorContains(t, err, "starts with a byte-order mark")
}

// A spec that is not JSON costs no more than its decoding: the scan for
// keys given twice runs only on JSON (a megabyte of '[' made a million
// allocations).
func TestDeepMalformedSpecsAllocateLittle(t *testing.T) {
	for _, body := range [][]byte{bytes.Repeat([]byte("["), 1<<20-1), bytes.Repeat([]byte(`{"a":`), 200_000)} {
		allocs := testing.AllocsPerRun(3, func() {
			_, err := Parse(body)
			require.Error(t, err)
		})
		require.Less(t, allocs, 1000.0, "%.10s...: %v allocations", body, allocs)
	}
	_, err := Parse([]byte("{\"name\":\"a\xff\",\"name\":\"b\",\"vertices\":[]}"))
	require.ErrorContains(t, err, "not UTF-8", "what makes it no JSON is said, not a key given twice")
}

// The sources a job's inputs list (a subtask of the read vertex each) are
// bounded: a dense graph within every other bound is refused above it,
// and one below is taken.
func TestTheSourcesOfAJobsInputsAreBounded(t *testing.T) {
	_, err := Parse([]byte(densespec.JSON(1000, 10, 57)))
	require.NoError(t, err, "55,347 edges of 10: 553,470 sources")
	_, err = Parse([]byte(densespec.JSON(1000, 20, 57)))
	require.EqualError(t, err, "vertices: the inputs list 1106940 sources in all (one for each subtask of the vertex an input reads), at most 1000000 allowed")
	_, err = Parse([]byte(`{"vertices":[{"id":"a","parallelism":10000,"command":["x"]},
		{"id":"b","parallelism":10000,"command":["x"],"inputs":[{"from":"a"}]}]}`))
	require.NoError(t, err, "10,000 by 10,000 all-to-all lists 10,000 sources")
}
