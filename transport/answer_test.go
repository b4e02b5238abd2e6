package transport

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// Answers are for people reading curl's output: an arrow stays an arrow.
func TestAnswersDoNotEscapeHTML(t *testing.T) {
	for _, f := range []Format{Compact, Indented} {
		_, b := f.Body(200, map[string]string{"error": "the job graph has a cycle: a -> b -> a & <c>"})
		require.Contains(t, string(b), "a -> b -> a & <c>")
		require.True(t, bytes.HasSuffix(b, []byte("}\n")), "%q", b)
		require.False(t, bytes.HasSuffix(b, []byte("\n\n")), "%q", b)
	}
}
