package membership

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/memberlist"
)

// Gossip encryption (docs/security.md). Every gossip message, UDP and TCP,
// is encrypted (AES-GCM) with the primary key of the node's keyring; a
// message is accepted if any key of the keyring opens it. A node whose
// keyring shares no key with the others' cannot read or send them anything:
// it is not a member. A node started without keys gossips in the clear and
// cannot be given keys later.
//
// Rotation: every node first gets the new key as a secondary key (it
// accepts it), then makes it primary (it sends with it), then drops the
// old one. Each step is applied to every node before the next begins.

// KeySize is the size of a gossip key: 32 bytes (AES-256).
const KeySize = 32

// NewKey returns a fresh gossip key, base64-encoded as --gossip-key takes
// it.
func NewKey() (string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// ParseKey decodes a base64 gossip key of KeySize bytes.
func ParseKey(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("gossip key is not base64: %w", err)
	}
	if len(b) != KeySize {
		return nil, fmt.Errorf("gossip key is %d bytes, want %d (generate one with 'jobmaster operator gossip keygen')", len(b), KeySize)
	}
	return b, nil
}

// ReadKeyring reads a keyring file: one base64 key per line, the first the
// primary (used to send), the others accepted; blank lines and lines
// starting with # are ignored. A file without a key is an error.
func ReadKeyring(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip keyring: %w", err)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := ParseKey(line)
		if err != nil {
			return nil, fmt.Errorf("gossip keyring %s, line %d: %w", path, n, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("gossip keyring %s holds no key", path)
	}
	return dedupe(keys), nil
}

// WriteKeyring writes keys (the first the primary) to a new keyring file,
// readable by its owner only.
func WriteKeyring(path string, keys []string) error {
	var b strings.Builder
	b.WriteString("# jobmaster gossip keyring: the first key is used, the others accepted.\n")
	for _, k := range keys {
		b.WriteString(k + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// LoadKeys is the keyring of a node: the keys of --gossip-key (a list, the
// first the primary) or of the file of --gossip-keyring; not both. None:
// gossip is not encrypted.
func LoadKeys(flagKeys []string, keyringFile string) ([][]byte, error) {
	if len(flagKeys) > 0 && keyringFile != "" {
		return nil, errors.New("--gossip-key and --gossip-keyring: give one of them")
	}
	if keyringFile != "" {
		return ReadKeyring(keyringFile)
	}
	var keys [][]byte
	for _, s := range flagKeys {
		k, err := ParseKey(s)
		if err != nil {
			return nil, fmt.Errorf("--gossip-key: %w", err)
		}
		keys = append(keys, k)
	}
	return dedupe(keys), nil
}

func dedupe(keys [][]byte) [][]byte {
	var out [][]byte
	for _, k := range keys {
		dup := false
		for _, o := range out {
			dup = dup || bytes.Equal(o, k)
		}
		if !dup {
			out = append(out, k)
		}
	}
	return out
}

// KeyringChange is how a keyring becomes another: the keys to install, the
// one to use (the new primary), and the keys to remove, applied in that
// order so that the node never stops accepting a key it still needs.
type KeyringChange struct {
	Install [][]byte
	Use     []byte
	Remove  [][]byte
}

// Empty reports whether the change changes nothing.
func (c KeyringChange) Empty() bool {
	return len(c.Install) == 0 && c.Use == nil && len(c.Remove) == 0
}

// PlanKeyring is the change from the keyring holding have, with primary
// in use, to want (want[0] the new primary).
func PlanKeyring(have [][]byte, primary []byte, want [][]byte) (KeyringChange, error) {
	if len(want) == 0 {
		return KeyringChange{}, errors.New("a keyring cannot become empty: gossip encryption cannot be turned off while running")
	}
	has := func(set [][]byte, k []byte) bool {
		for _, s := range set {
			if bytes.Equal(s, k) {
				return true
			}
		}
		return false
	}
	var c KeyringChange
	for _, k := range want {
		if !has(have, k) {
			c.Install = append(c.Install, k)
		}
	}
	if !bytes.Equal(primary, want[0]) {
		c.Use = want[0]
	}
	for _, k := range have {
		if !has(want, k) {
			c.Remove = append(c.Remove, k)
		}
	}
	return c, nil
}

// Encrypted reports whether the node encrypts its gossip.
func (n *Node) Encrypted() bool { return n.keyring != nil }

// SetKeys makes keys (keys[0] the primary) the node's keyring: PlanKeyring's
// change, applied to the running memberlist at once. A node started
// without keys cannot get any: restart it with them.
func (n *Node) SetKeys(keys [][]byte) (KeyringChange, error) {
	if n.keyring == nil {
		return KeyringChange{}, errors.New("gossip is not encrypted on this node: restart it with --gossip-key or --gossip-keyring")
	}
	for _, k := range keys {
		if err := memberlist.ValidateKey(k); err != nil {
			return KeyringChange{}, err
		}
	}
	c, err := PlanKeyring(n.keyring.GetKeys(), n.keyring.GetPrimaryKey(), keys)
	if err != nil {
		return c, err
	}
	for _, k := range c.Install {
		if err := n.keyring.AddKey(k); err != nil {
			return c, err
		}
	}
	if c.Use != nil {
		if err := n.keyring.UseKey(c.Use); err != nil {
			return c, err
		}
	}
	for _, k := range c.Remove {
		if err := n.keyring.RemoveKey(k); err != nil {
			return c, err
		}
	}
	return c, nil
}

// ReloadKeyring reads the keyring file again and makes it the node's
// keyring (SetKeys).
func (n *Node) ReloadKeyring(path string) (KeyringChange, error) {
	keys, err := ReadKeyring(path)
	if err != nil {
		return KeyringChange{}, err
	}
	return n.SetKeys(keys)
}
