package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tokenFile names the file under DataDir that holds the newest fencing token.
const tokenFile = "fencing-token"

// tokenVerdict is what to do with a leader request's fencing token.
type tokenVerdict int

const (
	// tokenStale: older than the newest seen; answer 409, act on nothing.
	tokenStale tokenVerdict = iota
	// tokenCurrent: the newest seen, already on disk; act.
	tokenCurrent
	// tokenPersist: newer than what is on disk; store it durably, then act.
	tokenPersist
)

// checkToken decides about token got, given the newest token seen and the
// newest one stored on disk (persisted <= newest).
func checkToken(newest, persisted, got uint64) tokenVerdict {
	switch {
	case got < newest:
		return tokenStale
	case got > persisted:
		return tokenPersist
	default:
		return tokenCurrent
	}
}

// loadToken reads the persisted token; a missing file means 0.
func loadToken(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, tokenFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read fencing token: %w", err)
	}
	tok, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fencing token file %s is corrupt (%q): refusing to start without it", filepath.Join(dir, tokenFile), b)
	}
	return tok, nil
}

// saveToken stores tok durably: a synced temporary file renamed over the
// token file, then the directory synced so the rename survives a crash.
func saveToken(dir string, tok uint64) (err error) {
	f, err := os.CreateTemp(dir, tokenFile+".tmp*")
	if err != nil {
		return fmt.Errorf("persist fencing token: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.WriteString(strconv.FormatUint(tok, 10) + "\n"); err != nil {
		return fmt.Errorf("persist fencing token: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("persist fencing token: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("persist fencing token: %w", err)
	}
	if err = os.Rename(f.Name(), filepath.Join(dir, tokenFile)); err != nil {
		return fmt.Errorf("persist fencing token: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("persist fencing token: %w", err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("persist fencing token: sync %s: %w", dir, err)
	}
	return nil
}
