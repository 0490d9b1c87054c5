package admin_test

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/certs"
)

// mtlsClient speaks TLS to the admin listener, trusting ca and presenting pair (none when pair is zero).
func mtlsClient(t *testing.T, ca string, pair certs.Pair) *http.Client {
	t.Helper()
	pool, err := config.LoadCertPool(ca)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if pair.CertFile != "" {
		c, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the server names, so a certificate of another CA reaches the handshake's check.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	tr := &http.Transport{TLSClientConfig: tc}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

func get(t *testing.T, c *http.Client, url, token string) (int, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Issue 12 "optionally mTLS": with admin.tls and a client CA, a verified client certificate whose
// fingerprint a principal holds is that principal (its scopes, its tenants); an unknown certificate is 401,
// a principal lacking the scope 403, a certificate of another CA fails the handshake, and a bearer token
// still works over the same listener.
func TestAdminMutualTLS(t *testing.T) {
	ca := certs.NewCA(t, "admin-ca")
	srv := ca.Server(t, "admin-server")
	ops, reader, stranger := ca.Client(t, "ops-cert"), ca.Client(t, "reader-cert"), ca.Client(t, "stranger")
	rogue := certs.NewCA(t, "rogue-ca").Client(t, "rogue")

	inst := startAdmin(t, "mtls", func(cfg *config.Config) {
		cfg.Admin.TLS = config.TLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File, ClientAuth: "request"}
		cfg.Admin.Principals = append(cfg.Admin.Principals,
			config.Principal{Name: "ops-cert", ClientCertSHA256: strings.ToUpper(ops.SHA256), Scopes: config.AdminScopes, Tenants: []string{"*"}},
			config.Principal{Name: "reader-cert", ClientCertSHA256: reader.SHA256, Scopes: []string{"metrics:read"}, Tenants: []string{"*"}})
	})
	base := "https://" + inst.AdminAddr()

	for _, c := range []struct {
		what   string
		pair   certs.Pair
		token  string
		status int
	}{
		{"certificate principal", ops, "", http.StatusOK},
		{"unknown certificate", stranger, "", http.StatusUnauthorized},
		{"certificate principal without the scope", reader, "", http.StatusForbidden},
		{"no certificate, no token", certs.Pair{}, "", http.StatusUnauthorized},
		{"bearer token without a certificate", certs.Pair{}, opsToken, http.StatusOK},
		{"bearer token beside an unknown certificate", stranger, opsToken, http.StatusOK},
	} {
		status, err := get(t, mtlsClient(t, ca.File, c.pair), base+"/v1/dlq", c.token)
		if err != nil || status != c.status {
			t.Fatalf("%s: %d %v, want %d", c.what, status, err, c.status)
		}
		t.Logf("%s: %d", c.what, status)
	}
	if _, err := get(t, mtlsClient(t, ca.File, rogue), base+"/v1/dlq", ""); err == nil {
		t.Fatal("a client certificate of another CA passed the handshake")
	} else {
		t.Logf("certificate of another CA: %v", err)
	}
	// Plain HTTP is not served on a TLS listener.
	if status, err := get(t, client, "http://"+inst.AdminAddr()+"/v1/dlq", opsToken); err == nil && status == http.StatusOK {
		t.Fatal("plain HTTP answered 200 on the TLS admin listener")
	}
}
