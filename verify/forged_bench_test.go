package verify

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// forgedBodyBytes is http.max_body_bytes' default: the largest body an unauthenticated sender may make a
// verifier read.
const forgedBodyBytes = 8_000_000

// BenchmarkForgedRequestWorstCase measures what one forged request costs the node at most: the largest
// body, a fresh timestamp, every rotation slot filled (8 keys) and as many well-formed but wrong
// signatures as the header parser takes. It reports ms/forged, the CPU one such request buys its sender,
// and MB-hashed/forged, the SHA input behind it (the figure the source's verify_failure_bytes budget is
// charged).
// Figures are printed, never asserted.
func BenchmarkForgedRequestWorstCase(b *testing.B) {
	body := []byte(strings.Repeat("x", forgedBodyBytes))
	now := time.Unix(1_750_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)

	var whsec, pubs Secrets
	for i := 0; i < MaxSecrets; i++ {
		whsec = append(whsec, "whsec_"+base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("key-%d", i))))
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		pubs = append(pubs, base64.StdEncoding.EncodeToString(pub))
	}
	_, forger, _ := ed25519.GenerateKey(rand.Reader)
	// offered repeats a wrong signature n times, each a well-formed token the parser accepts.
	offered := func(prefix string, sig []byte, sep string, n int) string {
		toks := make([]string, n)
		for i := range toks {
			toks[i] = prefix + base64.StdEncoding.EncodeToString(sig)
		}
		return strings.Join(toks, sep)
	}
	edSig := ed25519.Sign(forger, []byte("msg_1."+ts+".forged"))
	macSig := make([]byte, 32)
	// As many signatures as a header may carry: the old parser tried the first 8 of any number, the
	// current one refuses more than MaxCandidates as malformed.
	const offer = MaxCandidates

	cases := []struct {
		name string
		spec Spec
		h    headers
	}{
		{"ed25519_8keys", Spec{Type: "ed25519", PublicKey: pubs},
			headers{"webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": offered("v1a,", edSig, " ", offer)}},
		{"standard_webhooks_8keys", Spec{Type: "standard_webhooks", Secret: whsec},
			headers{"webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": offered("v1,", macSig, " ", offer)}},
		{"github_8keys", Spec{Type: "github", Secret: whsec},
			headers{"x-hub-signature-256": "sha256=" + strings.Repeat("ab", 32)}},
		{"ed25519_8keys_stale_timestamp", Spec{Type: "ed25519", PublicKey: pubs},
			headers{"webhook-id": "msg_1", "webhook-timestamp": "1000000000", "webhook-signature": offered("v1a,", edSig, " ", offer)}},
		{"ed25519_8keys_malformed_signature", Spec{Type: "ed25519", PublicKey: pubs},
			headers{"webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": "v1a,@@@"}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			v := mustNew(b, c.spec)
			m := make(map[string][]byte, len(c.h))
			for k, val := range c.h {
				m[k] = []byte(val)
			}
			r := &Request{Body: body, Header: func(name string) []byte { return m[name] }, Now: now}
			if res := v.Verify(r); res.Status != StatusFailed {
				b.Fatal("a forged request verified")
			}
			b.ReportAllocs()
			var hashed int64
			for b.Loop() {
				hashed = v.Verify(r).HashedBytes
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/forged")
			// The hashing a forged request buys, independent of the machine's load.
			b.ReportMetric(float64(hashed)/1e6, "MB-hashed/forged")
		})
	}
}
