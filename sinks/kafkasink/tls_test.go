package kafkasink

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// selfSigned returns a server certificate for 127.0.0.1 and the PEM file of the CA that signed it (itself).
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kfake"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"kafka.test"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, ca
}

// tls: {ca_file, server_name} is wired to the client: a TLS cluster is reached with the CA that signed it,
// and a sink that does not trust it fails (not permanent) instead of producing in clear or unverified.
func TestTLS(t *testing.T) {
	cert, ca := selfSigned(t)
	c := newCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	s := newTestSink(t, c.ListenAddrs(), map[string]any{"tls": map[string]any{"ca_file": ca, "server_name": "kafka.test"}})
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("over tls")), 10*time.Second); err != nil {
		t.Fatalf("with the cluster's CA: %v", err)
	}
	untrusting := newTestSink(t, c.ListenAddrs(), map[string]any{"tls": true, "produce_timeout_ms": 1000})
	err := sinktest.Deliver(untrusting, sinktest.Envelope([]byte("refused")), 5*time.Second)
	if cl, _ := sinks.Classify(err); err == nil || cl == sinks.PermanentClass {
		t.Fatalf("with the system roots only: %v (%s), want a non-permanent error", err, cl)
	}
}
