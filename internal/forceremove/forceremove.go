// Package forceremove deletes a tree that a task may have left behind
// with directories it made read-only (`chmod 500`, or `cp -a` of a
// read-only tree such as a Go module cache). os.RemoveAll cannot unlink
// the entries of a directory without write permission, even one its
// caller owns, and an executor that runs as an ordinary user then kept
// the tree for good: a task's working directory, a partition's bytes, its
// staging area, which it clears at every start.
package forceremove

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// All removes path and everything below it, as os.RemoveAll does; when
// that fails on a permission, it gives the owner back read, write and
// search permission on every directory of the tree (links are not
// followed) and tries once more.
func All(path string) error {
	err := os.RemoveAll(path)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	// WalkDir visits a directory before it reads it: made readable
	// first, it is then read.
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d == nil || !d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil && info.Mode().Perm()&0o700 != 0o700 {
			_ = os.Chmod(p, info.Mode().Perm()|0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}
