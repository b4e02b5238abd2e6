// Package unprivileged runs a test as an ordinary user. Root ignores
// file permissions, so a test of what a permission denies an executor
// proves nothing as root; CI runs as root. Only tests import it.
package unprivileged

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nobody is the user and group the test runs as.
const nobody = "65534"

// envMark marks the run of a test again as nobody.
const envMark = "JOBMASTER_TEST_UNPRIVILEGED"

// Here reports whether the calling test should run its body in this
// process: yes when this process is not root. As root it runs the test
// (t.Name()) again, as nobody, in a copy of the test binary, and fails t
// if that run fails; the caller then returns. Without setpriv(1) the test
// is skipped.
func Here(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return true
	}
	if os.Getenv(envMark) != "" {
		t.Fatal("still root after setpriv")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("root ignores file permissions, and setpriv(1), to run this test as another user, is not installed")
	}
	// A directory nobody may use: the binary's copy, and TMPDIR.
	dir, err := os.MkdirTemp("", "unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test.bin")
	if err := copyFile(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid="+nobody, "--regid="+nobody, "--clear-groups", bin,
		"-test.run", "^"+t.Name()+"$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir, envMark+"=1", "GOCOVERDIR=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && (exit.ExitCode() == 126 || exit.ExitCode() == 127) && strings.HasPrefix(string(out), "setpriv: failed to execute ") {
		// setpriv could not run the copy (a temporary directory mounted
		// noexec, say): nothing was tested.
		t.Skipf("the test binary could not be run as user %s: %s", nobody, out)
	}
	if err != nil {
		t.Fatalf("as user %s: %v\n%s", nobody, err, out)
	}
	t.Logf("ran as user %s:\n%s", nobody, out)
	return false
}

// copyFile copies the running test binary to dst.
func copyFile(dst string, mode os.FileMode) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
