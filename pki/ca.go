package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	cryptorand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"slices"
	"time"
)

// Validity defaults, as Nomad's and Consul's CA tools have them.
const (
	DefaultCAValidity   = 5 * 365 * 24 * time.Hour
	DefaultCertValidity = 365 * 24 * time.Hour
	// backdate is how far before now a certificate becomes valid, so that a
	// peer whose clock is a little behind accepts it at once.
	backdate = 5 * time.Minute
)

// CA is a certificate authority: its certificate and its private key.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA creates a CA valid from now for validity, its key drawn from rand.
// Its common name carries a random suffix, so that two CAs (the old and the
// new one during a rotation) can be told apart.
func NewCA(rand io.Reader, now time.Time, validity time.Duration) (*CA, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("validity must be positive, got %s", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	serial, err := newSerial(rand)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "jobmaster CA " + hex.EncodeToString(serial.Bytes()[:4]), Organization: []string{"jobmaster"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Request is what a certificate is issued for.
type Request struct {
	Identity Identity
	// IPs and DNS are the addresses and names the holder is reached at,
	// besides the loopback ones every certificate covers.
	IPs []net.IP
	DNS []string
	// Now is when the certificate is issued; it is valid from shortly
	// before Now for Validity.
	Now      time.Time
	Validity time.Duration
}

// Loopback is what every certificate covers.
var (
	LoopbackIPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	LoopbackDNS = []string{"localhost"}
)

// Issued is a certificate and its private key, PEM-encoded.
type Issued struct {
	Cert     *x509.Certificate
	CertPEM  []byte
	KeyPEM   []byte
	Identity Identity
}

// Issue issues a certificate for r, signed by ca, its key drawn from rand.
// A node's certificate is valid for TLS servers and clients, a client's
// for TLS clients only. It may not outlive the CA.
func (ca *CA) Issue(rand io.Reader, r Request) (*Issued, error) {
	if err := r.Identity.Check(); err != nil {
		return nil, err
	}
	if r.Validity <= 0 {
		return nil, fmt.Errorf("validity must be positive, got %s", r.Validity)
	}
	notAfter := r.Now.Add(r.Validity)
	if notAfter.After(ca.Cert.NotAfter) {
		until := ca.Cert.NotAfter.UTC().Format(time.DateOnly)
		if days := int(ca.Cert.NotAfter.Sub(r.Now) / (24 * time.Hour)); days >= 1 {
			return nil, fmt.Errorf("the certificate would outlive its CA (valid until %s): issue it for at most %d days (--days %d), or rotate the CA first", until, days, days)
		}
		return nil, fmt.Errorf("the certificate would outlive its CA (valid until %s, less than a day from now): rotate the CA first", until)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	serial, err := newSerial(rand)
	if err != nil {
		return nil, err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if r.Identity.Role.Node() {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: r.Identity.String(), Organization: []string{"jobmaster"}},
		NotBefore:    r.Now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  mergeIPs(LoopbackIPs, r.IPs),
		DNSNames:     mergeNames(LoopbackDNS, r.DNS),
		URIs:         []*url.URL{r.Identity.URI()},
	}
	der, err := x509.CreateCertificate(rand, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Issued{
		Cert:     cert,
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Identity: r.Identity,
	}, nil
}

// newSerial is a random 128-bit serial number.
func newSerial(rand io.Reader) (*big.Int, error) {
	n, err := cryptorand.Int(rand, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // never zero
}

func mergeIPs(base, more []net.IP) []net.IP {
	out := slices.Clone(base)
	for _, ip := range more {
		if !slices.ContainsFunc(out, ip.Equal) {
			out = append(out, ip)
		}
	}
	return out
}

func mergeNames(base, more []string) []string {
	out := slices.Clone(base)
	for _, n := range more {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// errNotCA: a certificate used as a CA is not one.
var errNotCA = errors.New("not a CA certificate")
