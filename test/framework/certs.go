package framework

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certValidity is how long issued leaf certificates are valid.
const certValidity = 365 * 24 * time.Hour

// KeyPair is a PEM certificate and private key, also written to files.
type KeyPair struct {
	// CertPEM is the PEM-encoded certificate.
	CertPEM []byte
	// KeyPEM is the PEM-encoded private key.
	KeyPEM []byte
	// CertFile and KeyFile are the paths CertPEM and KeyPEM are written to.
	CertFile, KeyFile string
}

// CA is a self-signed certificate authority that issues serving and client certificates.
type CA struct {
	KeyPair
	// Cert is the parsed CA certificate.
	Cert *x509.Certificate
	// Signer is the CA's private key.
	Signer crypto.Signer
}

// NewCA creates a self-signed CA with the given common name (ECDSA P-256, valid ten years) and
// writes it to <dir>/<name>.crt and <dir>/<name>.key. It fails the test on any error.
func NewCA(t TB, dir, name, commonName string) *CA {
	t.Helper()
	key, keyPEM := newKey(t)
	caCert, err := cert.NewSelfSignedCACert(cert.Config{CommonName: commonName}, key)
	if err != nil {
		t.Fatalf("creating CA %q: %v", commonName, err)
	}
	ca := &CA{Cert: caCert, Signer: key}
	ca.KeyPair = writeKeyPair(t, dir, name, encodeCert(t, caCert), keyPEM)
	return ca
}

// IssueServingCert issues a TLS serving certificate for hosts (IP addresses become IP SANs,
// anything else DNS SANs; the first host is also the common name) and writes it to
// <dir>/<name>.crt and <dir>/<name>.key. It fails the test on any error.
func (ca *CA) IssueServingCert(t TB, dir, name string, hosts ...string) *KeyPair {
	t.Helper()
	if len(hosts) == 0 {
		t.Fatalf("IssueServingCert %s: no hosts", name)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(t, dir, name, tmpl)
}

// IssueClientCert issues a TLS client certificate that Kubernetes authenticates as user
// (common name) with groups (organizations), and writes it to <dir>/<name>.crt and
// <dir>/<name>.key. It fails the test on any error.
func (ca *CA) IssueClientCert(t TB, dir, name, user string, groups ...string) *KeyPair {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(t, dir, name, tmpl)
}

// issue completes tmpl, signs it with the CA and writes the result.
func (ca *CA) issue(t TB, dir, name string, tmpl *x509.Certificate) *KeyPair {
	t.Helper()
	key, keyPEM := newKey(t)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("issuing %s: %v", name, err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour) // tolerate clock skew
	tmpl.NotAfter = now.Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Signer)
	if err != nil {
		t.Fatalf("issuing %s: %v", name, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("issuing %s: %v", name, err)
	}
	kp := writeKeyPair(t, dir, name, encodeCert(t, c), keyPEM)
	return &kp
}

// NewKeyFile creates an ECDSA P-256 private key, writes it PEM-encoded to <dir>/<name>.key
// (for example as a service-account signing key) and returns the path. It fails the test on
// any error.
func NewKeyFile(t TB, dir, name string) string {
	t.Helper()
	_, keyPEM := newKey(t)
	path := filepath.Join(dir, name+".key")
	if err := keyutil.WriteKey(path, keyPEM); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
	return path
}

// newKey returns a fresh ECDSA P-256 key and its PEM encoding.
func newKey(t TB) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generating key: %v", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatalf("encoding key: %v", err)
	}
	return key, keyPEM
}

// encodeCert PEM-encodes c.
func encodeCert(t TB, c *x509.Certificate) []byte {
	t.Helper()
	data, err := cert.EncodeCertificates(c)
	if err != nil {
		t.Fatalf("encoding certificate: %v", err)
	}
	return data
}

// writeKeyPair writes certPEM and keyPEM to <dir>/<name>.crt and <dir>/<name>.key.
func writeKeyPair(t TB, dir, name string, certPEM, keyPEM []byte) KeyPair {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kp := KeyPair{
		CertPEM:  certPEM,
		KeyPEM:   keyPEM,
		CertFile: filepath.Join(dir, name+".crt"),
		KeyFile:  filepath.Join(dir, name+".key"),
	}
	if err := cert.WriteCert(kp.CertFile, certPEM); err != nil {
		t.Fatal(fmt.Errorf("writing %s: %w", kp.CertFile, err))
	}
	if err := keyutil.WriteKey(kp.KeyFile, keyPEM); err != nil {
		t.Fatal(fmt.Errorf("writing %s: %w", kp.KeyFile, err))
	}
	return kp
}
