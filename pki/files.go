package pki

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File names in a directory of certificates.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// CertFile is the name of the certificate file of id: <role>-<node id>.pem.
func CertFile(id Identity) string { return string(id.Role) + "-" + id.NodeID + ".pem" }

// KeyFile is the name of the key file of id: <role>-<node id>-key.pem.
func KeyFile(id Identity) string { return string(id.Role) + "-" + id.NodeID + "-key.pem" }

// File modes: a key is readable by its owner only.
const (
	certMode fs.FileMode = 0o644
	keyMode  fs.FileMode = 0o600
)

// WriteCA writes ca into dir (created if missing) as CAFile and CAKeyFile.
// It overwrites neither: a CA that exists is an error.
func WriteCA(dir string, ca *CA) (certPath, keyPath string, err error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return "", "", err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return writePair(dir, CAFile, certPEM, CAKeyFile, keyPEM)
}

// WriteIssued writes an issued certificate into dir (created if missing) as
// CertFile and KeyFile of its identity. It overwrites neither.
func WriteIssued(dir string, is *Issued) (certPath, keyPath string, err error) {
	return writePair(dir, CertFile(is.Identity), is.CertPEM, KeyFile(is.Identity), is.KeyPEM)
}

// writePair writes a certificate and its key, the key first and with mode
// keyMode, after checking that neither exists.
func writePair(dir, certName string, certPEM []byte, keyName string, keyPEM []byte) (string, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	certPath, keyPath := filepath.Join(dir, certName), filepath.Join(dir, keyName)
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", fmt.Errorf("%s exists: remove it first, or write to another --dir", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", "", err
		}
	}
	if err := writeNew(keyPath, keyPEM, keyMode); err != nil {
		return "", "", err
	}
	if err := writeNew(certPath, certPEM, certMode); err != nil {
		os.Remove(keyPath)
		return "", "", err
	}
	return certPath, keyPath, nil
}

// writeNew creates path with data and mode (whatever the umask), failing if
// it exists, and syncs it.
func writeNew(path string, data []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// LoadCA reads the CA in dir (CAFile and CAKeyFile) and checks that the key
// is the certificate's and that the certificate is a CA's.
func LoadCA(dir string) (*CA, error) {
	cert, err := readCert(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, CAFile), errNotCA)
	}
	keyPath := filepath.Join(dir, CAKeyFile)
	b, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", keyPath)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k, err = x509.ParseECPrivateKey(block.Bytes); err != nil {
			return nil, fmt.Errorf("%s: %w", keyPath, err)
		}
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of %s", keyPath, filepath.Join(dir, CAFile))
	}
	return &CA{Cert: cert, Key: key}, nil
}

// readCert reads the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	certs, err := ParseCerts(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return certs[0], nil
}

// ParseCerts reads every certificate of PEM data; none is an error.
func ParseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate in PEM data")
	}
	return out, nil
}
