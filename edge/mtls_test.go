package edge_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/verify"
)

// selfSigned makes a certificate and key; the server one names 127.0.0.1.
func selfSigned(t *testing.T, cn string, server bool) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if server {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, certPEM, keyPEM
}

// Design: "the pinned mutual-TLS client certificate (Verifier.ClientCert) ... tested in
// instance_test.exs (a real mutual-TLS handshake)".
func TestClientCertificateOverRealMTLS(t *testing.T) {
	_, srvCert, srvKey := selfSigned(t, "ankusa", true)
	client, _, _ := selfSigned(t, "provider", false)
	stranger, _, _ := selfSigned(t, "stranger", false)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, srvCert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, srvKey, 0o600); err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(client.Certificate[0])
	spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	inst := start(t, func(c *config.Config) {
		c.HTTP.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile, ClientAuth: "request"}
		c.Sources["pinned"] = config.Source{Tenant: "default", Sinks: []config.SinkSpec{{Type: "log"}},
			Verify: verify.Spec{Type: "client_cert", Pins: []string{"spki-sha256:" + hex.EncodeToString(spki[:])}}}
	}, nil)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srvCert)
	post := func(certs []tls.Certificate) reply {
		c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
		defer c.CloseIdleConnections()
		resp, err := c.Post("https://"+inst.IngestAddr()+"/webhooks/pinned", "application/json", bytes.NewReader([]byte(`{"mtls":1}`)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return toReply(t, resp)
	}
	post([]tls.Certificate{client}).expect(t, 201, "")
	r := post([]tls.Certificate{stranger})
	r.expect(t, 401, "verification_failed")
	if r.body["reason"] != "certificate_mismatch" {
		t.Fatalf("reason %v", r.body["reason"])
	}
	r = post(nil)
	r.expect(t, 401, "verification_failed")
	if r.body["reason"] != "no_certificate" {
		t.Fatalf("reason %v", r.body["reason"])
	}
	if n := len(hooks(t, inst)); n != 1 {
		t.Fatalf("%d hooks stored; only the pinned client's may be", n)
	}
}
