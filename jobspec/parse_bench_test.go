package jobspec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bigSpecs are legitimate specs at the limits: as many vertices as a job
// may have, each with an input from the one before; and commands and envs
// as large as a job's may be together (MaxTaskBytes as JSON).
func bigSpecs() map[string][]byte {
	var vs []string
	for i := range MaxVertices {
		in := ""
		if i > 0 {
			in = fmt.Sprintf(`,"inputs":[{"from":"v%d","mode":"blocking"}]`, i-1)
		}
		vs = append(vs, fmt.Sprintf(`{"id":"v%d","parallelism":1,"command":["/bin/true","--index","%d"],"env":{"A":"1"}%s}`, i, i, in))
	}
	vertices := `{"name":"wide","vertices":[` + strings.Join(vs, ",") + `]}`
	// Four vertices of 120 KiB of arguments and env each: 480 KiB and
	// some as JSON, under MaxTaskBytes.
	vs = vs[:0]
	arg := strings.Repeat("a", 20<<10)
	for i := range 4 {
		args := strings.TrimSuffix(strings.Repeat(`"`+arg+`",`, 3), ",")
		vs = append(vs, fmt.Sprintf(`{"id":"v%d","parallelism":2,"command":["sh",%s],"env":{"X":"%s","Y":"%s","Z":"%s"}}`, i, args, arg, arg, arg))
	}
	long := `{"name":"long","vertices":[` + strings.Join(vs, ",") + `]}`
	return map[string][]byte{"small": []byte(valid), "1000-vertices": []byte(vertices), "long-commands": []byte(long)}
}

func TestSpecsAtTheLimitsParse(t *testing.T) {
	for name, body := range bigSpecs() {
		s, err := Parse(body)
		require.NoError(t, err, name)
		require.NotEmpty(t, s.Vertices, name)
	}
}

func BenchmarkParse(b *testing.B) {
	benchSpecs(b, func(body []byte) error { _, err := Parse(body); return err })
}

// The count before decoding, alone: what it adds to every Parse.
func BenchmarkTooMany(b *testing.B) { benchSpecs(b, tooMany) }

// benchSpecs runs f on each of the specs at the limits.
func benchSpecs(b *testing.B, f func([]byte) error) {
	for _, name := range []string{"small", "1000-vertices", "long-commands"} {
		body := bigSpecs()[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := f(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
