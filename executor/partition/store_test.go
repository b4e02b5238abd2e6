package partition

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"jobmaster/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// meta is producer subtask 1 of vertex gen of job j, with outputs.
func meta(attempt int) Meta {
	return Meta{ID: wire.ExecutionID("j", "gen", 1, attempt), JobID: "j", Vertex: "gen", Subtask: 1, Attempt: attempt, Outputs: outputs}
}

// tree lists the files and directories under dir, with a trailing / for
// directories and @ for anything else that is not a regular file.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == ".":
		case fi.IsDir():
			out = append(out, rel+"/")
		case fi.Mode().IsRegular():
			out = append(out, rel)
		default:
			out = append(out, rel+"@")
		}
		return nil
	}))
	sort.Strings(out)
	return out
}

func write(t *testing.T, path, data string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
}

// messyOutput is an output directory with data and every kind of thing
// that must be ignored.
func messyOutput(t *testing.T, out string) (secret string) {
	t.Helper()
	secret = filepath.Join(t.TempDir(), "secret")
	write(t, secret, "not data")
	write(t, filepath.Join(out, "count", "0"), "aaa")
	write(t, filepath.Join(out, "count", "2"), "")
	write(t, filepath.Join(out, "count", "notes.txt"), "ignored")
	write(t, filepath.Join(out, "count", "07"), "ignored")
	write(t, filepath.Join(out, "count", "3"), "out of range")
	write(t, filepath.Join(out, "count", "sub", "0"), "nested")
	require.NoError(t, os.Symlink(secret, filepath.Join(out, "count", "1")))
	write(t, filepath.Join(out, "map", "1"), "bb")
	require.NoError(t, syscall.Mkfifo(filepath.Join(out, "map", "pipe"), 0o600))
	write(t, filepath.Join(out, "map", "0"), "not my index")
	write(t, filepath.Join(out, "readme"), "stray")
	write(t, filepath.Join(out, "other", "0"), "no such consumer")
	require.NoError(t, os.Symlink(filepath.Dir(secret), filepath.Join(out, "linked")))
	return secret
}

func TestCommitKeepsWhatCountsAndNothingElse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "partitions")
	var logged bytes.Buffer
	s, err := Open(dir, slog.New(slog.NewTextHandler(&logged, nil)))
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "output")
	secret := messyOutput(t, out)
	m := meta(0)
	s.Begin(m, out)
	require.True(t, s.Live(m.ID))
	n, err := s.Commit(m.ID)
	require.NoError(t, err)
	require.EqualValues(t, 5, n, "count/0 (3 bytes), count/2 (empty) and map/1 (2 bytes)")
	require.False(t, s.Live(m.ID))
	require.Equal(t, []wire.Partition{{ID: m.ID, JobID: "j", Vertex: "gen", Subtask: 1, Attempt: 0, Bytes: 5}}, s.List())
	require.Equal(t, []string{"j/", "j/gen/", "j/gen/1/", "j/gen/1/0/", "j/gen/1/0/data/", "j/gen/1/0/data/count/",
		"j/gen/1/0/data/count/0", "j/gen/1/0/data/count/2", "j/gen/1/0/data/map/", "j/gen/1/0/data/map/1", "j/gen/1/0/meta.json", "~staging/"},
		tree(t, dir))
	_, err = os.Lstat(out)
	require.ErrorIs(t, err, os.ErrNotExist, "the output moved")
	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	require.Equal(t, "not data", string(b), "what a link pointed to is untouched")
	require.Contains(t, logged.String(), `entries named as data that are not regular files`)
	require.Contains(t, logged.String(), `entries=[count/1]`, "the link named as data is said; other entries are no data by name")
	for _, d := range []string{dir, filepath.Join(dir, "j"), filepath.Join(dir, "j/gen/1/0"), filepath.Join(dir, "j/gen/1/0/data")} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), d)
	}

	// The store finds it again; a damaged one and leftovers are removed.
	m2 := meta(1)
	out2 := filepath.Join(t.TempDir(), "output")
	write(t, filepath.Join(out2, "count", "1"), "xyz")
	s.Begin(m2, out2)
	_, err = s.Commit(m2.ID)
	require.NoError(t, err)
	f, err := os.OpenFile(filepath.Join(dir, "j/gen/1/1/data/count/1"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("more")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	write(t, filepath.Join(dir, staging, "leftover", "data", "count", "0"), "half moved")
	write(t, filepath.Join(dir, "stray"), "x")
	write(t, filepath.Join(dir, "j", "gen", "2", "0", "data", "count", "0"), "no metadata")
	s.Close()
	s2, err := Open(dir, quiet())
	require.NoError(t, err)
	require.Equal(t, s.Lookup([]string{m.ID}), s2.List(), "only the whole partition is back")
	require.Equal(t, []string{"j/", "j/gen/", "j/gen/1/", "j/gen/1/0/", "j/gen/1/0/data/", "j/gen/1/0/data/count/",
		"j/gen/1/0/data/count/0", "j/gen/1/0/data/count/2", "j/gen/1/0/data/map/", "j/gen/1/0/data/map/1", "j/gen/1/0/meta.json", "~staging/"},
		tree(t, dir))
}

func TestAnOutputDirectoryReplacedByALinkIsEmpty(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	elsewhere := t.TempDir()
	write(t, filepath.Join(elsewhere, "count", "0"), "not the task's to give")
	out := filepath.Join(t.TempDir(), "output")
	require.NoError(t, os.Symlink(elsewhere, out))
	m := meta(0)
	s.Begin(m, out)
	n, err := s.Commit(m.ID)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, []string{"count/", "count/0"}, tree(t, elsewhere), "the link's target is untouched")
}

func TestReleaseAndDiscard(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, quiet())
	require.NoError(t, err)
	for a := 0; a < 2; a++ {
		out := filepath.Join(t.TempDir(), "output")
		write(t, filepath.Join(out, "count", "0"), "data")
		s.Begin(meta(a), out)
		_, err := s.Commit(meta(a).ID)
		require.NoError(t, err)
	}
	require.Equal(t, []string{meta(0).ID}, s.Release([]string{"unknown/v/0/0", meta(0).ID, meta(0).ID}))
	require.Equal(t, []string{meta(1).ID}, ids(s.List()))
	require.NotContains(t, tree(t, dir), "j/gen/1/0/")
	require.Empty(t, s.Release([]string{meta(0).ID}), "released once")
	require.Equal(t, []string{meta(1).ID}, s.Release([]string{meta(1).ID}))
	require.Equal(t, []string{"~staging/"}, tree(t, dir), "directories left empty are removed too")

	// A running producer that fails leaves nothing; nor does one whose
	// partition was kept before its end was known to be a cancel.
	out := filepath.Join(t.TempDir(), "output")
	write(t, filepath.Join(out, "count", "0"), "data")
	s.Begin(meta(2), out)
	s.Discard(meta(2).ID)
	_, err = os.Lstat(out)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Empty(t, s.List())
	out = filepath.Join(t.TempDir(), "output")
	write(t, filepath.Join(out, "count", "0"), "data")
	s.Begin(meta(3), out)
	_, err = s.Commit(meta(3).ID)
	require.NoError(t, err)
	s.Discard(meta(3).ID)
	require.Empty(t, s.List())
	require.Equal(t, []string{"~staging/"}, tree(t, dir))
}

func TestSimulatedOutputsStayInMemory(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, quiet())
	require.NoError(t, err)
	s.Begin(meta(0), "")
	n, err := s.Commit(meta(0).ID)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, []string{meta(0).ID}, ids(s.List()))
	require.Equal(t, []string{"~staging/"}, tree(t, dir), "nothing on disk")
	require.Equal(t, []string{meta(0).ID}, s.Release([]string{meta(0).ID}))
	require.Empty(t, s.List())
	_, err = s.Commit("never/begun/0/0")
	require.Error(t, err)
}

func ids(ps []wire.Partition) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ID)
	}
	return out
}

func TestTombstonesAreBounded(t *testing.T) {
	s, err := Open(t.TempDir(), quiet())
	require.NoError(t, err)
	for i := 0; i < maxTombstones+10; i++ {
		m := meta(i)
		s.Begin(m, "")
		s.Discard(m.ID)
	}
	require.Len(t, s.failed, maxTombstones)
	require.Len(t, s.failedFIF, maxTombstones)
	_, old := s.failed[meta(0).ID]
	require.False(t, old, "the oldest are forgotten")
	require.True(t, strings.HasPrefix(s.failedFIF[0], "j/gen/1/"))
}

// TestVerifyDropsPartitionsGoneFromDisk: a partition deleted behind the
// store's back is no longer listed; the others stay.
func TestVerifyDropsPartitionsGoneFromDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, quiet())
	require.NoError(t, err)
	for a := 0; a < 2; a++ {
		out := filepath.Join(t.TempDir(), "output")
		write(t, filepath.Join(out, "count", "0"), "data")
		s.Begin(meta(a), out)
		_, err := s.Commit(meta(a).ID)
		require.NoError(t, err)
	}
	require.Empty(t, s.Verify(), "both are there")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, filepath.FromSlash(meta(0).ID))))
	require.Equal(t, []string{meta(0).ID}, s.Verify())
	require.Equal(t, []string{meta(1).ID}, ids(s.List()))
	require.Empty(t, s.Verify(), "dropped once")

	// One whose data alone went: what is left of it (its metadata) goes.
	left := filepath.Join(dir, filepath.FromSlash(meta(1).ID))
	require.NoError(t, os.RemoveAll(filepath.Join(left, "data")))
	require.Equal(t, []string{meta(1).ID}, s.Verify())
	_, err = os.Lstat(left)
	require.ErrorIs(t, err, os.ErrNotExist, "its metadata was left behind")
	require.Equal(t, []string{"~staging/"}, tree(t, dir), "nothing of them is left")
}
