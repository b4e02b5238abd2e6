package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"jobmaster/membership"
	"jobmaster/pki"
	"jobmaster/transport"
)

// `jobmaster dev` runs secure (docs/security.md): it creates a CA, the
// certificates of its masters, its executors and one client ("dev"), a
// gossip keyring and the secret of its management token, in
// <data dir>/tls, runs every node with TLS, the keyring and --acl, and
// bootstraps the ACLs with that secret. On its default ports it also
// publishes what a client needs (the CA, the client certificate and the
// token) where the client commands look when given no address and no CA:
// devCredentialsDir. So the README's commands work from another terminal
// without flags.

// devClientID names the client certificate dev issues.
const devClientID = "dev"

// devTokenFile is the file of the management token's secret, in the
// credentials directory and among the published ones.
const devTokenFile = "management.token"

// devSecurity is the credentials of one dev cluster.
type devSecurity struct {
	dir     string
	ca      *pki.CA
	keyring string
	client  transport.TLSFiles
	// token is the management token's secret, in tokenFile.
	token, tokenFile string
}

// newDevSecurity creates dir afresh with a CA, a gossip keyring, the
// client certificate and the management token's secret. The secret of a
// previous dev on the same directory is kept: a --data-dir that is used
// again holds a cluster bootstrapped with it.
func newDevSecurity(dir string) (*devSecurity, error) {
	token := ""
	if b, err := os.ReadFile(filepath.Join(dir, devTokenFile)); err == nil {
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		token = "dev-" + hex.EncodeToString(b[:])
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	ca, err := pki.NewCA(rand.Reader, time.Now(), 30*24*time.Hour)
	if err != nil {
		return nil, err
	}
	if _, _, err := pki.WriteCA(dir, ca); err != nil {
		return nil, err
	}
	key, err := membership.NewKey()
	if err != nil {
		return nil, err
	}
	s := &devSecurity{dir: dir, ca: ca, keyring: filepath.Join(dir, "gossip.keyring")}
	if err := membership.WriteKeyring(s.keyring, []string{key}); err != nil {
		return nil, err
	}
	if s.client, err = s.issue(pki.Client, devClientID); err != nil {
		return nil, err
	}
	s.token, s.tokenFile = token, filepath.Join(dir, devTokenFile)
	if err := os.WriteFile(s.tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

// issue writes the certificate of role and id and returns its files.
func (s *devSecurity) issue(role pki.Role, id string) (transport.TLSFiles, error) {
	is, err := s.ca.Issue(rand.Reader, pki.Request{Identity: pki.Identity{Role: role, NodeID: id}, Now: time.Now(), Validity: 29 * 24 * time.Hour})
	if err != nil {
		return transport.TLSFiles{}, err
	}
	cert, key, err := pki.WriteIssued(s.dir, is)
	if err != nil {
		return transport.TLSFiles{}, err
	}
	return transport.TLSFiles{CA: filepath.Join(s.dir, pki.CAFile), Cert: cert, Key: key}, nil
}

// devCredentials are the files a client needs to reach a dev cluster: its
// CA, the client certificate, and the management token's secret (token;
// "" from a dev that published none).
type devCredentials struct{ ca, cert, key, token string }

// readToken is the secret in d.token, "" if there is none.
func (d devCredentials) readToken() string {
	if d.token == "" {
		return ""
	}
	b, err := os.ReadFile(d.token)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Names in devCredentialsDir.
const (
	devCAFile   = "ca.pem"
	devCertFile = "client.pem"
	devKeyFile  = "client-key.pem"
	devPIDFile  = "dev.pid"
)

// devCredentialsDir is where a dev on its default ports publishes its
// credentials: $XDG_CACHE_HOME/jobmaster/dev, else
// $HOME/.cache/jobmaster/dev; "" when neither variable is set.
func devCredentialsDir(getenv func(string) string) string {
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "jobmaster", "dev")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "jobmaster", "dev")
	}
	return ""
}

// publishDevCredentials copies the CA, the client certificate and the
// management token to dir (mode 0700, files 0600) with the pid of this
// dev, and returns the
// function that removes them again (and dir, if that leaves it empty),
// unless another dev has published its own since.
func publishDevCredentials(dir string, s *devSecurity) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	for _, f := range []struct{ from, to string }{
		{s.client.CA, devCAFile}, {s.client.Cert, devCertFile}, {s.client.Key, devKeyFile}, {s.tokenFile, devTokenFile},
	} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			return nil, err
		}
		if err := replaceFile(filepath.Join(dir, f.to), b); err != nil {
			return nil, err
		}
	}
	if err := replaceFile(filepath.Join(dir, devPIDFile), pid); err != nil {
		return nil, err
	}
	return func() {
		if b, err := os.ReadFile(filepath.Join(dir, devPIDFile)); err == nil && bytes.Equal(b, pid) {
			for _, f := range []string{devPIDFile, devCAFile, devCertFile, devKeyFile, devTokenFile} {
				os.Remove(filepath.Join(dir, f))
			}
			os.Remove(dir) // only if nothing else is in it
		}
	}, nil
}

// replaceFile writes data to path through a temporary file and a rename,
// so that a reader sees the old file or the new one.
func replaceFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// findDevCredentials returns the credentials a dev published, if the dev
// that published them still runs and the directory is the user's own and
// private (nobody else could have planted a CA there).
func findDevCredentials(getenv func(string) string) (devCredentials, bool) {
	dir := devCredentialsDir(getenv)
	if dir == "" {
		return devCredentials{}, false
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm()&0o077 != 0 {
		return devCredentials{}, false
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return devCredentials{}, false
	}
	b, err := os.ReadFile(filepath.Join(dir, devPIDFile))
	if err != nil {
		return devCredentials{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !processAlive(pid) {
		return devCredentials{}, false
	}
	d := devCredentials{ca: filepath.Join(dir, devCAFile), cert: filepath.Join(dir, devCertFile), key: filepath.Join(dir, devKeyFile)}
	for _, f := range []string{d.ca, d.cert, d.key} {
		if _, err := os.Stat(f); err != nil {
			return devCredentials{}, false
		}
	}
	if _, err := os.Stat(filepath.Join(dir, devTokenFile)); err == nil {
		d.token = filepath.Join(dir, devTokenFile)
	}
	return d, true
}

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// describeDevSecurity is the line dev prints about its credentials.
func describeDevSecurity(s *devSecurity, published string) string {
	where := fmt.Sprintf("  TLS on every port, gossip encrypted, --acl on: certificates, the gossip key and the management token in %s\n", s.dir)
	if published != "" {
		where += fmt.Sprintf("  client commands find the CA and the token in %s while this cluster runs\n", published)
	}
	return where
}
