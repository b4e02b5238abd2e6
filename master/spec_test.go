package master

import (
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/jobspec"
)

func mustSpec(t *testing.T, body string) *jobspec.Spec {
	t.Helper()
	s, err := jobspec.Parse([]byte(body))
	require.NoError(t, err)
	return s
}
