package examples

import (
	"io/fs"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/jobspec"
)

func TestExamplesAreValidSpecs(t *testing.T) {
	files, err := fs.Glob(FS, "*.json")
	require.NoError(t, err)
	require.Len(t, files, 4)
	for _, f := range files {
		b, err := FS.ReadFile(f)
		require.NoError(t, err)
		_, err = jobspec.Parse(b)
		require.NoError(t, err, f)
	}
}

// The README's job spec is one a reader can submit as it is: it parses, and
// its commands are ones every machine has.
func TestReadmeSpecIsValid(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)A job is a JSON spec.*?```json\n(.*?)\n```").FindSubmatch(b)
	require.NotNil(t, m, "README.md shows a job spec after 'A job is a JSON spec'")
	spec, err := jobspec.Parse(m[1])
	require.NoError(t, err)
	for _, v := range spec.Vertices {
		require.Equal(t, "sh", v.Command[0], "vertex %s runs a command every machine has", v.ID)
	}
}

// The two-stage job of docs/api.md is examples/sums.json.
func TestAPIDocSumsIsTheExample(t *testing.T) {
	b, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)This job sums the numbers.*?```json\n(.*?)\n```").FindSubmatch(b)
	require.NotNil(t, m, "docs/api.md shows the sums job")
	doc, err := jobspec.Parse(m[1])
	require.NoError(t, err)
	file, err := FS.ReadFile("sums.json")
	require.NoError(t, err)
	want, err := jobspec.Parse(file)
	require.NoError(t, err)
	require.Equal(t, want, doc)
}
