package integration

import (
	"os"
	"testing"
)

// TestMain removes the race-built binary the tests shared.
func TestMain(m *testing.M) {
	code := m.Run()
	removeBinary()
	os.Exit(code)
}
