package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// tokenFile names the file under DataDir that holds the fencing state: the
// newest token on the first line, then the cluster it came from, then the
// clusters that were replaced (one per line).
const tokenFile = "fencing-token"

// maxRetired bounds how many replaced clusters an executor remembers.
const maxRetired = 16

// fence is an executor's fencing state: the cluster it serves, the newest
// token it has seen from it, and the clusters that cluster replaced (a
// leader of one of those is stale whatever its token).
type fence struct {
	Cluster string
	Token   uint64
	Retired []string
}

func (f fence) equal(g fence) bool {
	return f.Cluster == g.Cluster && f.Token == g.Token && slices.Equal(f.Retired, g.Retired)
}

// admitFence is the fencing decision for a request from a leader of
// cluster with token. It returns the fence to hold afterwards, or stale
// with the reason. A token compares only with tokens of its own cluster; a
// request from a new cluster (formed afresh or restored from a snapshot,
// whose tokens start over) replaces the old cluster for good, so a stale
// leader of the old one can never come back. A leader that names no
// cluster is judged by its token alone.
func admitFence(cur fence, cluster string, token uint64) (next fence, stale bool, why string) {
	switch {
	case cluster != "" && slices.Contains(cur.Retired, cluster):
		return cur, true, fmt.Sprintf("cluster %s has been replaced by cluster %s", cluster, cur.Cluster)
	case cluster != "" && cur.Cluster != "" && cluster != cur.Cluster:
		retired := append(slices.Clone(cur.Retired), cur.Cluster)
		if len(retired) > maxRetired {
			retired = retired[len(retired)-maxRetired:]
		}
		return fence{Cluster: cluster, Token: token, Retired: retired}, false, ""
	case token < cur.Token:
		return cur, true, fmt.Sprintf("stale fencing token %d: the newest seen is %d", token, cur.Token)
	}
	next = cur
	next.Token = token
	if next.Cluster == "" {
		next.Cluster = cluster
	}
	return next, false, ""
}

// loadFence reads the persisted fencing state; a missing file means none.
func loadFence(dir string) (fence, error) {
	b, err := os.ReadFile(filepath.Join(dir, tokenFile))
	if errors.Is(err, fs.ErrNotExist) {
		return fence{}, nil
	}
	if err != nil {
		return fence{}, fmt.Errorf("read fencing token: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	tok, err := strconv.ParseUint(strings.TrimSpace(lines[0]), 10, 64)
	if err != nil {
		return fence{}, fmt.Errorf("fencing token file %s is corrupt (%q): refusing to start without it", filepath.Join(dir, tokenFile), b)
	}
	f := fence{Token: tok}
	if len(lines) > 1 {
		f.Cluster = strings.TrimSpace(lines[1])
	}
	for _, l := range lines[min(2, len(lines)):] {
		if l = strings.TrimSpace(l); l != "" {
			f.Retired = append(f.Retired, l)
		}
	}
	return f, nil
}

// saveFence stores f durably: a synced temporary file renamed over the
// token file, then the directory synced so the rename survives a crash. If
// the filesystem is full, the token file is overwritten in place instead
// (inplace.go): a full disk must not refuse a new leader.
func saveFence(dir string, fc fence) error {
	text := fenceText(fc)
	err := replaceFence(dir, text)
	if err != nil && noSpace(err) {
		if overwrite(filepath.Join(dir, tokenFile), []byte(text), true) == nil {
			return nil
		}
	}
	return err
}

// fenceText is the token file's contents for fc.
func fenceText(fc fence) string {
	text := strconv.FormatUint(fc.Token, 10) + "\n" + fc.Cluster + "\n"
	for _, r := range fc.Retired {
		text += r + "\n"
	}
	return text
}

// replaceFence writes text to a new file and renames it over the token
// file.
func replaceFence(dir, text string) (err error) {
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
	if _, err = f.WriteString(text); err != nil {
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
