package executor

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRotatorKeepsNFiles: writes past the limit rotate, the files keep at
// most the limit each, only the newest files are kept, and the log read
// across them is the tail of what was written.
func TestRotatorKeepsNFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stdout.log")
	r, err := openRotator(path, 10, 3)
	require.NoError(t, err)
	var all bytes.Buffer
	for i := 0; i < 9; i++ {
		line := strings.Repeat(string(rune('a'+i)), 4) + "\n" // 5 bytes
		all.WriteString(line)
		_, err := r.Write([]byte(line))
		require.NoError(t, err)
	}
	_, err = r.Write([]byte("0123456789ABCDE")) // larger than one file
	require.NoError(t, err)
	all.WriteString("0123456789ABCDE")
	require.NoError(t, r.Close())
	for n := 0; n < 3; n++ {
		fi, err := os.Stat(rotatedName(path, n))
		require.NoError(t, err)
		require.LessOrEqual(t, fi.Size(), int64(10))
	}
	require.NoFileExists(t, rotatedName(path, 3))

	lp, err := openLog(path, 3)
	require.NoError(t, err)
	defer lp.close()
	got, err := io.ReadAll(lp.reader(0))
	require.NoError(t, err)
	want := all.Bytes()[all.Len()-int(lp.size()):]
	require.Equal(t, string(want), string(got))
	require.Equal(t, "ABCDE", string(want[len(want)-5:]))
	tail, err := io.ReadAll(lp.reader(lp.size() - 7))
	require.NoError(t, err)
	require.Equal(t, "89ABCDE", string(tail))
}

// TestLogCursorFollowsRotations: a follower reading the current file goes
// on through the files rotated after it, losing and repeating nothing,
// also when the writer rotated twice between two reads.
func TestLogCursorFollowsRotations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stdout.log")
	r, err := openRotator(path, 8, 4)
	require.NoError(t, err)
	defer r.Close()
	write := func(s string) {
		_, err := r.Write([]byte(s))
		require.NoError(t, err)
	}
	write("abcd")
	lp, err := openLog(path, 4)
	require.NoError(t, err)
	var got bytes.Buffer
	_, err = io.Copy(&got, lp.reader(0))
	require.NoError(t, err)
	cur := lp.cursor()
	lp.close()
	defer cur.close()
	buf := make([]byte, 3)
	write("efgh") // fills the file
	require.NoError(t, cur.copyTo(&got, buf))
	write("ijklmnop") // a rotation
	write("qrst")     // another
	require.NoError(t, cur.copyTo(&got, buf))
	write("uv")
	require.NoError(t, cur.copyTo(&got, buf))
	require.Equal(t, "abcdefghijklmnopqrstuv", got.String())
}

// TestOpenLogMissing: a log without a current file does not exist.
func TestOpenLogMissing(t *testing.T) {
	_, err := openLog(filepath.Join(t.TempDir(), "stdout.log"), 3)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// After a rotation failed (its file closed, the new one not opened: the
// disk full), the next write opens the log again; after Close, none does.
func TestRotatorOpensAgainAfterAFailedRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stdout.log")
	r, err := openRotator(path, 0, 1)
	require.NoError(t, err)
	_, err = r.Write([]byte("one\n"))
	require.NoError(t, err)
	require.NoError(t, r.f.Close())
	r.f = nil // as rotate leaves it when it cannot open the new file
	_, err = r.Write([]byte("two\n"))
	require.NoError(t, err)
	require.NoError(t, r.Close())
	_, err = r.Write([]byte("three\n"))
	require.ErrorIs(t, err, fs.ErrClosed)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\n", string(b))
}
