package executor

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"jobmaster/wire"
)

// maxComponent bounds one component of an execution id (it becomes a
// directory name).
const maxComponent = 200

// validateExecutionID checks that id is "<job>/<vertex>/<subtask>/<attempt>"
// with safe components, so that it can name a directory under DataDir.
func validateExecutionID(id string) error {
	parts := strings.Split(id, "/")
	if len(parts) != 4 {
		return fmt.Errorf("execution id %q: want <job>/<vertex>/<subtask>/<attempt>", id)
	}
	for i, p := range parts {
		if err := validComponent(p); err != nil {
			return fmt.Errorf("execution id %q: %w", id, err)
		}
		if i >= 2 {
			if _, err := parseIndex(p); err != nil {
				return fmt.Errorf("execution id %q: %w", id, err)
			}
		}
	}
	return nil
}

// validComponent accepts a non-empty name of [A-Za-z0-9._-] other than "."
// and "..".
func validComponent(s string) error {
	if s == "" {
		return fmt.Errorf("empty component")
	}
	if s == "." || s == ".." {
		return fmt.Errorf("component %q is not allowed", s)
	}
	if len(s) > maxComponent {
		return fmt.Errorf("component longer than %d bytes", maxComponent)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("component %q: only [A-Za-z0-9._-] is allowed", s)
		}
	}
	return nil
}

// parseIndex parses a canonical non-negative decimal (no sign, no leading
// zeros), so that one index has one spelling and one directory.
func parseIndex(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("%q is not a canonical non-negative number", s)
	}
	return n, nil
}

// validateTask checks a deployed task's identity: a valid execution id that
// agrees with the task's other fields.
func validateTask(t wire.Task) error {
	if err := validateExecutionID(t.ExecutionID); err != nil {
		return err
	}
	want := wire.ExecutionID(t.JobID, t.Vertex, t.Subtask, t.Attempt)
	if t.ExecutionID != want {
		return fmt.Errorf("execution id %q does not match job_id, vertex, subtask and attempt (%q)", t.ExecutionID, want)
	}
	if t.Parallelism < 1 || t.Subtask >= t.Parallelism {
		return fmt.Errorf("execution %s: subtask %d out of range for parallelism %d", t.ExecutionID, t.Subtask, t.Parallelism)
	}
	return nil
}

// executionDir is the working directory of a (valid) execution id.
func executionDir(dataDir, id string) string {
	return filepath.Join(dataDir, "executions", filepath.FromSlash(id))
}
