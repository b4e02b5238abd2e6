package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMechanismsAreTheProductsMessages: every log message the report
// counts is one the product still logs (a renamed message made the report
// say "executors declared lost: 0" in runs that lost executors).
func TestMechanismsAreTheProductsMessages(t *testing.T) {
	var src strings.Builder
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "integration" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			src.Write(b)
		}
		return nil
	})
	require.NoError(t, err)
	for _, m := range mechanisms {
		if m.raft {
			continue
		}
		text := strings.TrimSuffix(strings.TrimPrefix(m.msg, `msg="`), `"`)
		text = strings.TrimSuffix(text, ": ")
		require.Contains(t, src.String(), text, "the report counts %q (%s), which no product code logs", m.msg, m.label)
	}
}
