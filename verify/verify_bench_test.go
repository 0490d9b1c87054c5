package verify

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkVerify measures one verification of a valid 1 KB hook per scheme, in the request goroutine as
// the edge calls it. The header lookup is a prebuilt map, so the allocations counted are the verifier's.
func BenchmarkVerify(b *testing.B) {
	body := strings.Repeat("x", 1024)
	now := time.Unix(1_750_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	swKey := []byte("bench-standard-webhooks-key")
	edPriv := edKey("bench")
	_, certKey, _ := ed25519.GenerateKey(rand.Reader)
	cert := selfSigned(b, "bench", certKey)

	cases := []struct {
		name string
		spec Spec
		h    headers
		cert bool
	}{
		{"stripe", Spec{Type: "stripe", Secret: Secrets{"k"}},
			headers{"stripe-signature": "t=" + ts + ",v1=" + hmacHex(sha256.New, "k", ts+"."+body)}, false},
		{"github", Spec{Type: "github", Secret: Secrets{"k"}},
			headers{"x-hub-signature-256": "sha256=" + hmacHex(sha256.New, "k", body)}, false},
		{"shopify", Spec{Type: "shopify", Secret: Secrets{"k"}},
			headers{"x-shopify-hmac-sha256": hmacB64([]byte("k"), body)}, false},
		{"slack", Spec{Type: "slack", Secret: Secrets{"k"}},
			headers{"x-slack-request-timestamp": ts, "x-slack-signature": "v0=" + hmacHex(sha256.New, "k", "v0:"+ts+":"+body)}, false},
		{"standard_webhooks", Spec{Type: "standard_webhooks", Secret: Secrets{"whsec_" + base64.StdEncoding.EncodeToString(swKey)}},
			headers{"webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": "v1," + hmacB64(swKey, "msg_1."+ts+"."+body)}, false},
		{"standard_webhooks_rotation_8_keys_last_matches", Spec{Type: "standard_webhooks", Secret: func() Secrets {
			s := make(Secrets, 8)
			for i := range s {
				s[i] = "whsec_" + base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("retired-%d", i)))
			}
			s[7] = "whsec_" + base64.StdEncoding.EncodeToString(swKey)
			return s
		}()}, headers{"webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": "v1," + hmacB64(swKey, "msg_1."+ts+"."+body)}, false},
		{"hmac_sha1", Spec{Type: "hmac", Secret: Secrets{"k"}, SignatureHeader: "x-sig", Hash: "sha1"},
			headers{"x-sig": hmacHex(sha1.New, "k", body)}, false},
		{"ed25519", Spec{Type: "ed25519", PublicKey: Secrets{base64.StdEncoding.EncodeToString(edPriv.Public().(ed25519.PublicKey))}},
			headers{"webhook-id": "msg_1", "webhook-timestamp": ts,
				"webhook-signature": "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(edPriv, []byte("msg_1."+ts+"."+body)))}, false},
		{"token_bearer", Spec{Type: "token", Secret: Secrets{"tok"}}, headers{"authorization": "Bearer tok"}, false},
		{"token_basic", Spec{Type: "token", Location: "basic", Username: "u", Secret: Secrets{"tok"}},
			headers{"authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("u:tok"))}, false},
		{"client_cert_spki", Spec{Type: "client_cert", Pins: []string{fmt.Sprintf("spki-sha256:%x", sha256.Sum256(cert.RawSubjectPublicKeyInfo))}}, nil, true},
		{"none", Spec{}, nil, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			v := mustNew(b, c.spec)
			m := make(map[string][]byte, len(c.h))
			for k, val := range c.h {
				m[k] = []byte(val)
			}
			r := &Request{Body: []byte(body), Header: func(name string) []byte { return m[name] }, Now: now}
			if c.cert {
				r.PeerCert = cert
			}
			if res := v.Verify(r); res.Status == StatusFailed {
				b.Fatalf("setup: %v", res.Reason)
			}
			if c.h["authorization"] == "" && !c.cert && c.name != "none" {
				b.SetBytes(int64(len(body))) // the body is signed: MB/s is the hashing rate
			}
			b.ReportAllocs()
			for b.Loop() {
				if v.Verify(r).Status == StatusFailed {
					b.Fatal("verification failed")
				}
			}
		})
	}
}
