package executor

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"jobmaster/wire"
)

func TestValidateExecutionID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"job/v/0/0", true},
		{"wordcount-1.x_Y/split/12/3", true},
		{"", false},
		{"job/v/0", false},
		{"job/v/0/0/x", false},
		{"../v/0/0", false},
		{"job/../0/0", false},
		{"job/./0/0", false},
		{"/job/v/0/0", false},
		{"job//0/0", false},
		{"job/v w/0/0", false},
		{"job/v\x00/0/0", false},
		{"job/v%2f/0/0", false},
		{`job\x/v/0/0`, false},
		{"job/v/a/0", false},
		{"job/v/-1/0", false},
		{"job/v/01/0", false},
		{"job/v/0/+1", false},
		{"job/v/99999999999999999999999/0", false},
		{strings.Repeat("j", maxComponent) + "/v/0/0", true},
		{strings.Repeat("j", maxComponent+1) + "/v/0/0", false},
	}
	for _, tc := range tests {
		err := validateExecutionID(tc.id)
		require.Equal(t, tc.ok, err == nil, "%q: %v", tc.id, err)
		if err == nil {
			dir := executionDir("/data", tc.id)
			rel, rerr := filepath.Rel("/data/executions", dir)
			require.NoError(t, rerr)
			require.False(t, strings.HasPrefix(rel, ".."), "%q escapes the data dir", tc.id)
		}
	}
}

func TestValidateTask(t *testing.T) {
	good := task("job", 1, 2, "true")
	require.NoError(t, validateTask(good))
	for name, mut := range map[string]func(*wire.Task){
		"id disagrees with subtask": func(t *wire.Task) { t.Subtask = 2 },
		"id disagrees with job":     func(t *wire.Task) { t.JobID = "other" },
		"bad id":                    func(t *wire.Task) { t.ExecutionID = "../../x/0/0" },
		"subtask >= parallelism":    func(t *wire.Task) { t.Parallelism = 1 },
		"zero parallelism":          func(t *wire.Task) { t.Parallelism = 0 },
	} {
		tk := good
		mut(&tk)
		require.Error(t, validateTask(tk), name)
	}
}
