// Package certs makes a small PKI for TLS tests: a CA, a server certificate for 127.0.0.1 and client
// certificates signed by it or by another CA, written as PEM files in a test's directory.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of the test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	File string // its certificate, PEM
	dir  string
}

// Pair is a certificate and its key on disk.
type Pair struct {
	CertFile, KeyFile string
	SHA256            string // hex SHA-256 of the certificate's DER (admin.principals[].client_cert_sha256)
}

// NewCA makes a CA named cn whose files go to t.TempDir().
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: next(), Subject: pkix.Name{CommonName: cn}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{cert: cert, key: key, dir: t.TempDir()}
	ca.File = write(t, ca.dir, cn+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1.
func (ca *CA) Server(t testing.TB, cn string) Pair {
	return ca.issue(t, cn, true)
}

// Client issues a client certificate.
func (ca *CA) Client(t testing.TB, cn string) Pair {
	return ca.issue(t, cn, false)
}

func (ca *CA) issue(t testing.TB, cn string, server bool) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: next(), Subject: pkix.Name{CommonName: cn},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if server {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return Pair{
		CertFile: write(t, ca.dir, cn+".pem", "CERTIFICATE", der),
		KeyFile:  write(t, ca.dir, cn+"-key.pem", "EC PRIVATE KEY", kder),
		SHA256:   hex.EncodeToString(sum[:]),
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func next() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err)
	}
	return n
}

func write(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
