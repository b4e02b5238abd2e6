package jobspec

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A spec's footprint counts every string it holds and a weight for each
// part, and is the same for the same spec whatever order its env's map
// yields.
func TestFootprintCountsEveryPart(t *testing.T) {
	parse := func(body string) *Spec {
		t.Helper()
		s, err := Parse([]byte(body))
		require.NoError(t, err)
		return s
	}
	base := parse(`{"vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`)
	fp := base.Footprint()
	require.Greater(t, fp, int64(len("v")+len("true")))
	big := strings.Repeat("x", 100_000)
	for name, body := range map[string]string{
		"an argument":  `{"vertices":[{"id":"v","parallelism":1,"command":["true","` + big + `"]}]}`,
		"an env value": `{"vertices":[{"id":"v","parallelism":1,"command":["true"],"env":{"A":"` + big + `"}}]}`,
		"a name":       `{"name":"` + big[:MaxIDLength] + `","vertices":[{"id":"v","parallelism":1,"command":["true"]}]}`,
	} {
		grown := parse(body).Footprint() - fp
		require.Greater(t, grown, int64(0), name)
		if name != "a name" {
			require.GreaterOrEqual(t, grown, int64(len(big)), name)
		}
	}
	two := parse(`{"vertices":[{"id":"a","parallelism":1,"command":["true"]},{"id":"b","parallelism":1,"command":["true"],"inputs":[{"from":"a"}],"resources":{"cpu_millis":100}}]}`)
	require.Greater(t, two.Footprint(), 2*fp-footprintSpec, "a second vertex, its input and resources")
	env := parse(`{"vertices":[{"id":"v","parallelism":1,"command":["true"],"env":{"A":"1","B":"22","C":"333","D":"4444"}}]}`)
	first := env.Footprint()
	for range 20 {
		require.Equal(t, first, env.Footprint())
	}
	require.Equal(t, fp, parse(`{"vertices":[{"id":"v","parallelism":9,"command":["true"]}]}`).Footprint(), "parallelism costs executions, counted by --max-executions")
}
