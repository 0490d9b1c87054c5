package verify

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"testing"
	"time"
)

var fuzzNow = time.Unix(1_750_000_000, 0)

var sentinels = []error{ErrNoMatch, ErrMissingSignature, ErrMalformedSignature, ErrBadSecret, ErrBadScheme,
	ErrTimestampOutOfWindow, ErrMissingTimestamp, ErrMissingCredential, ErrCertificateMismatch, ErrNoCertificate}

// checkResult holds for every Result: success and a reason exclude each other, a failure names a
// sentinel, and the labels are set.
func checkResult(t *testing.T, res Result) {
	t.Helper()
	switch res.Status {
	case StatusOK:
		if res.Reason != nil {
			t.Fatalf("ok with reason %v", res.Reason)
		}
	case StatusFailed:
		known := false
		for _, s := range sentinels {
			known = known || errors.Is(res.Reason, s)
		}
		if !known {
			t.Fatalf("failed with reason %v, not a sentinel", res.Reason)
		}
	default:
		t.Fatalf("status %d from a signing verifier", res.Status)
	}
	if res.Provider == "" || res.Scheme == "" {
		t.Fatalf("unlabelled result %+v", res)
	}
}

// fuzzPair runs one request through a verifier and through its twin built with an unrelated key: a request
// that verifies under both would mean the proof does not depend on the key.
func fuzzPair(t *testing.T, v, twin Verifier, r *Request) {
	res := v.Verify(r)
	checkResult(t, res)
	other := twin.Verify(r)
	checkResult(t, other)
	if res.Status == StatusOK && other.Status == StatusOK {
		t.Fatalf("request verifies under two unrelated keys")
	}
}

func hdrRequest(body []byte, h map[string]string) *Request {
	return &Request{
		Body: body,
		Header: func(name string) []byte {
			if v, ok := h[name]; ok {
				return []byte(v)
			}
			return nil
		},
		Now: fuzzNow,
	}
}

// The HMAC engine never panics on arbitrary signature, timestamp and signed-header values or bodies
// ("fuzz the parsers, codecs and signature verifiers", STYLE).
func FuzzVerifyHMAC(f *testing.F) {
	specs := []Spec{
		{Type: "stripe"}, {Type: "github"}, {Type: "shopify"}, {Type: "slack"},
		{Type: "hmac", SignatureHeader: "x-sig", Parse: "csv_pairs", SigKey: "s", TimestampField: "t",
			Signed: "{ts}.{header:x-id}.{body}", Hash: "sha1"},
		{Type: "hmac", SignatureHeader: "x-sig", Parse: "space_versions", Version: "v9", TimestampHeader: "x-ts",
			Signed: "{header:x-id}:{ts}:{body}", Hash: "sha512", Encoding: "base64"},
	}
	var vs, twins []Verifier
	for _, s := range specs {
		s.Secret = Secrets{"fuzz-key-new", "fuzz-key-old"}
		vs = append(vs, mustNew(f, s))
		s.Secret = Secrets{"unrelated-key"}
		twins = append(twins, mustNew(f, s))
	}
	ts := strconv.FormatInt(fuzzNow.Unix(), 10)
	body := `{"id":"evt_1"}`
	f.Add("t="+ts+",v1="+hmacHex(sha256.New, "fuzz-key-new", ts+"."+body), ts, "id-1", []byte(body))
	f.Add("sha256="+hmacHex(sha256.New, "fuzz-key-old", body), ts, "", []byte(body))
	f.Add(hmacB64([]byte("fuzz-key-new"), body), "", "", []byte(body))
	f.Add("v0="+hmacHex(sha256.New, "fuzz-key-new", "v0:"+ts+":"+body), ts, "", []byte(body))
	f.Add("t=1,s=00,s=,=,,t=2", "99999999999999999999", "x", []byte{})
	f.Add("v9,AAAA v9, v9,==== v1,x", "-1", "", []byte{0xff})
	f.Fuzz(func(t *testing.T, sig, tsv, id string, body []byte) {
		h := map[string]string{
			"stripe-signature": sig, "x-hub-signature-256": sig, "x-shopify-hmac-sha256": sig,
			"x-slack-signature": sig, "x-sig": sig, "x-slack-request-timestamp": tsv, "x-ts": tsv, "x-id": id,
		}
		for i := range vs {
			fuzzPair(t, vs[i], twins[i], hdrRequest(body, h))
		}
	})
}

// Standard Webhooks v1 never panics on arbitrary webhook-* headers or bodies.
func FuzzVerifyStandardWebhooks(f *testing.F) {
	key := []byte("fuzz-standard-webhooks-key")
	v := mustNew(f, Spec{Type: "standard_webhooks", Secret: Secrets{"whsec_" + base64.StdEncoding.EncodeToString(key)}})
	twin := mustNew(f, Spec{Type: "standard_webhooks", Secret: Secrets{"whsec_" + base64.StdEncoding.EncodeToString([]byte("other"))}})
	ts := strconv.FormatInt(fuzzNow.Unix(), 10)
	body := `{"test": 2432232314}`
	f.Add("msg_1", ts, "v1,"+hmacB64(key, "msg_1."+ts+"."+body), []byte(body))
	f.Add("msg_1", ts, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1a,xx v2,yy", []byte(body))
	f.Add("", "", "v1,", []byte{})
	f.Add("id", "0017500000000", "   v1,=== v1,AAAA", []byte("x"))
	f.Fuzz(func(t *testing.T, id, tsv, sig string, body []byte) {
		r := hdrRequest(body, map[string]string{"webhook-id": id, "webhook-timestamp": tsv, "webhook-signature": sig})
		fuzzPair(t, v, twin, r)
	})
}

// Ed25519 (v1a) never panics on arbitrary headers or bodies; arbitrary signature bytes reach
// ed25519.Verify, which must refuse non-canonical encodings without panicking.
func FuzzVerifyEd25519(f *testing.F) {
	priv := edKey("fuzz-ed25519")
	pub := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	v := mustNew(f, Spec{Type: "ed25519", PublicKey: Secrets{pub}})
	twin := mustNew(f, Spec{Type: "ed25519", PublicKey: Secrets{base64.StdEncoding.EncodeToString(edKey("other").Public().(ed25519.PublicKey))}})
	ts := strconv.FormatInt(fuzzNow.Unix(), 10)
	body := `{"test": 2432232314}`
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte("msg_1."+ts+"."+body)))
	f.Add("msg_1", ts, "v1a,"+sig, []byte(body))
	f.Add("msg_1", ts, "v1,"+sig+" v1a,"+sig, []byte(body))
	f.Add("", ts, "v1a,", []byte{})
	f.Add("m", "1", "v1a,"+base64.StdEncoding.EncodeToString(make([]byte, 64)), []byte("x"))
	f.Fuzz(func(t *testing.T, id, tsv, sig string, body []byte) {
		r := hdrRequest(body, map[string]string{"webhook-id": id, "webhook-timestamp": tsv, "webhook-signature": sig})
		fuzzPair(t, v, twin, r)
	})
}

// The token verifier never panics on arbitrary Authorization, header or query values.
func FuzzVerifyToken(f *testing.F) {
	mk := func(secret string) []Verifier {
		return []Verifier{
			mustNew(f, Spec{Type: "token", Secret: Secrets{secret}}),
			mustNew(f, Spec{Type: "token", Location: "basic", Username: "user", Secret: Secrets{secret}}),
			mustNew(f, Spec{Type: "token", Location: "header", Name: "X-Api-Key", Secret: Secrets{secret}}),
			mustNew(f, Spec{Type: "token", Location: "query", Name: "token", Secret: Secrets{secret}}),
		}
	}
	vs, twins := mk("fuzz-token"), mk("other-token")
	f.Add("Bearer fuzz-token", "fuzz-token", "fuzz-token")
	f.Add("Basic "+base64.StdEncoding.EncodeToString([]byte("user:fuzz-token")), "", "")
	f.Add("Basic ====", "x", "")
	f.Add("bearer", "", "")
	f.Fuzz(func(t *testing.T, auth, key, query string) {
		r := hdrRequest(nil, map[string]string{"authorization": auth, "x-api-key": key})
		r.Query = func(name string) []byte {
			if name == "token" {
				return []byte(query)
			}
			return nil
		}
		for i := range vs {
			fuzzPair(t, vs[i], twins[i], r)
		}
	})
}
