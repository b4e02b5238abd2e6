package examples

import (
	"io/fs"
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
