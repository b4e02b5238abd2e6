package integration

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// What a failed test leaves behind: every node's whole log and the run's
// directory (the nodes' data, and for a chaos run its history, report and
// replay kit), copied to an artifact folder that outlives the test's
// temporary directory:
//
//	<repo>/.artifacts/<kind>/<test>-<time>/
//
// (JOBMASTER_ARTIFACTS names another root). The test's output prints the
// folder and, for a quick look, every master's leadership history.

// artifactsRoot is JOBMASTER_ARTIFACTS, or .artifacts at the root of the
// repository (the directory holding go.mod above the package).
func artifactsRoot() string {
	if d := os.Getenv("JOBMASTER_ARTIFACTS"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return ".artifacts"
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, ".artifacts")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, ".artifacts")
		}
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// artifactDir is where a failed run of the named test keeps its files.
func artifactDir(kind, name string, at time.Time) string {
	name = unsafeName.ReplaceAllString(strings.ReplaceAll(name, "/", "-"), "")
	return filepath.Join(artifactsRoot(), kind, name+"-"+at.Format("20060102T150405"))
}

// saveArtifacts copies the run's directory to c.artifacts and says where.
func (c *Cluster) saveArtifacts() {
	n, size, err := copyTree(c.dir, c.artifacts)
	if err != nil {
		c.t.Logf("ARTIFACTS: copying %s to %s: %v (copied %d files)", c.dir, c.artifacts, err, n)
		return
	}
	c.t.Logf("ARTIFACTS of this failed run (every node's whole log, the nodes' data, history, report, replay kit; %d files, %.1f MB): %s",
		n, float64(size)/(1<<20), c.artifacts)
}

// copyTree copies the regular files under src to dst, keeping the
// layout. A node's socket or named pipe (a task's pipelined input) is
// skipped.
func copyTree(src, dst string) (files int, size int64, err error) {
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a task's directory may vanish while we walk
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		n, err := copyFile(path, to)
		if err == nil {
			files++
			size += n
		}
		return nil
	})
	return files, size, err
}

func copyFile(from, to string) (int64, error) {
	in, err := os.Open(from)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// leadershipLine matches the master log lines that trace leadership over a
// whole run: elections, terms, epochs and starts.
var leadershipLine = regexp.MustCompile(`leadership (established|lost)|entering (leader|follower|candidate) state|election won|starting election|=== start|in cluster|state restored`)

// dumpLogs prints every master's leadership history; the whole logs are
// in the artifact folder.
func (c *Cluster) dumpLogs() {
	for _, n := range c.Masters {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			continue
		}
		var hist []string
		for _, l := range strings.Split(string(b), "\n") {
			if leadershipLine.MatchString(l) {
				hist = append(hist, l)
			}
		}
		c.t.Logf("---- leadership history of %s (whole log: %s) ----\n%s", n.ID,
			filepath.Join(c.artifacts, filepath.Base(n.LogPath)), strings.Join(hist, "\n"))
	}
}
