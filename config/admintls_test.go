package config

import (
	"os"
	"strings"
	"testing"
)

// Issue 12 "optionally mTLS": a certificate principal needs admin.tls with a client CA, the client CA must
// parse, and every refusal names its dotted key.
func TestAdminTLSValidation(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/bad.pem"
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	fp := strings.Repeat("ab", 32)
	for _, c := range []struct {
		yml, path, msg string
	}{
		{"admin: {principals: [{name: c, client_cert_sha256: '" + fp + "', scopes: [dlq:read], tenants: ['*']}]}",
			"admin.principals[0].client_cert_sha256", "needs admin.tls"},
		{"admin: {tls: {cert_file: " + dir + "/c.pem, key_file: " + dir + "/k.pem, client_auth: request, client_ca_file: " + bad + "}}",
			"admin.tls.client_ca_file", "must be a readable PEM file"},
		{"admin: {tls: {cert_file: " + dir + "/c.pem, key_file: " + dir + "/k.pem, client_auth: require, client_ca_file: " + dir + "/missing.pem}}",
			"admin.tls.client_ca_file", "must be a readable PEM file"},
		{"admin: {tls: {cert_file: " + dir + "/c.pem}}", "admin.tls", "cert_file and key_file are both required"},
		{"admin: {tls: {cert_file: a, key_file: b, client_auth: maybe}}", "admin.tls.client_auth", "must be one of"},
		{"admin: {tls: {cert_file: a, key_file: b, client_auth: require}}", "admin.tls.client_ca_file", "is required"},
		{"admin: {principals: [{name: c, client_cert_sha256: nothex, scopes: [dlq:read], tenants: ['*']}]}",
			"admin.principals[0].client_cert_sha256", "must be the 64 hex digits"},
		{"admin: {principals: [{name: c, token_sha256: '" + fp + "', client_cert_sha256: '" + fp + "', scopes: [dlq:read], tenants: ['*']}]}",
			"admin.principals[0]", "needs exactly one of token_sha256, token_file and client_cert_sha256"},
	} {
		_, err := Parse([]byte(c.yml), envOf(nil))
		found := false
		for _, p := range problemsOf(t, err) {
			if p.Path == c.path && strings.Contains(p.Msg, c.msg) {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: %v, want %s: %s", c.yml, err, c.path, c.msg)
		}
	}
	ca := dir + "/ca.pem"
	if err := os.WriteFile(ca, []byte(testCA), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, "admin: {tls: {cert_file: a, key_file: b, client_auth: request, client_ca_file: "+ca+"}, "+
		"principals: [{name: c, client_cert_sha256: '"+strings.ToUpper(strings.Repeat("ab:", 31))+"AB', scopes: [dlq:read], tenants: ['*']}]}", nil)
	if got := CertFingerprint(c.Admin.Principals[0].ClientCertSHA256); got != fp {
		t.Fatalf("fingerprint %s, want %s", got, fp)
	}
}

// testCA is a self-signed CA certificate (P-256) that only has to parse.
const testCA = `
-----BEGIN CERTIFICATE-----
MIIBejCCASGgAwIBAgIULP/uj1FP/Dc9V+zsmv2k+5OjOHkwCgYIKoZIzj0EAwIw
EjEQMA4GA1UEAwwHdGVzdC1jYTAgFw0yNjEyMDMxMjUwNTNaGA8yMTI2MTEwOTEy
NTA1M1owEjEQMA4GA1UEAwwHdGVzdC1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABN/tuKATOBmamqnjh/1qWWt0we1rx/Tgm7Klbor7+KmwzC6etX0I4+5y2uLL
8ZFMXuE/HjZz9xYfZILgF26wFTajUzBRMB0GA1UdDgQWBBT2VdlF9isi+GQ8a20G
VgMMM6frfjAfBgNVHSMEGDAWgBT2VdlF9isi+GQ8a20GVgMMM6frfjAPBgNVHRMB
Af8EBTADAQH/MAoGCCqGSM49BAMCA0cAMEQCIBxu6r3R47R4zYF6p0cOirg/UmBe
OSzUnA2Z1VxhSvDeAiBPHtQ4TlYMfZmH/FmEBQ5h+ZNxJoQP7znmvtDHb6Cotw==
-----END CERTIFICATE-----
`
