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
	require.Len(t, files, 3)
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
