package verify

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"github.com/ankusa-go/ankusa/verify/verifytest"
	"hash"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type vector struct {
	verifytest.Vector
	headers headers
	now     time.Time
}

func (v vector) spec(secret string) Spec {
	s := Spec{Type: v.Type, PublicURL: v.PublicURL}
	if v.PublicKey != "" {
		s.PublicKey = Secrets{v.PublicKey}
	} else {
		s.Secret = Secrets{secret}
	}
	return s
}

func (v vector) request(body string, now time.Time) *Request {
	r := request(body, v.headers, now)
	if v.Query != "" {
		r.RawQuery = []byte(v.Query)
	}
	return r
}

func vectors(t testing.TB) []vector {
	vs, err := verifytest.Load("testdata/providers")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]vector, len(vs))
	for i, v := range vs {
		out[i] = vector{Vector: v, headers: headers{}, now: v.Now}
		for j := 0; j+1 < len(v.Headers); j += 2 {
			out[i].headers[v.Headers[j]] = v.Headers[j+1]
		}
		if !v.Stamped() {
			out[i].now = time.Unix(1_750_000_000, 0)
		}
	}
	return out
}

// Every preset verifies its provider's published example (or, where the provider publishes none, a
// vector built from its documented algorithm outside this package), and refuses the same request with a
// tampered body, under a wrong secret, and, where the scheme has a timestamp, an hour later.
func TestProviderPresetsVerifyPublishedExamples(t *testing.T) {
	for _, vec := range vectors(t) {
		t.Run(vec.Type+"/"+strconv.Itoa(len(vec.Body)), func(t *testing.T) {
			v := mustNew(t, vec.spec(vec.Secret))
			res := v.Verify(vec.request(vec.Body, vec.now))
			wantOK(t, res)
			if res.Provider != vec.Type {
				t.Fatalf("provider %q, want %q", res.Provider, vec.Type)
			}
			if res.WeakHash != (vec.Type == "twilio" || vec.Type == "intercom") {
				t.Fatalf("%s: WeakHash %v", vec.Type, res.WeakHash)
			}

			tampered := strings.Replace(vec.Body, "e", "E", 1)
			if vec.Type == "mailgun" {
				// Mailgun signs timestamp + token alone (the event data is not covered): tamper the token.
				tampered = strings.Replace(vec.Body, `"token":"a`, `"token":"b`, 1)
			}
			if vec.Type == "twilio" && vec.Query != "" && strings.Contains(vec.Query, "bodySHA256") {
				tampered = strings.Replace(vec.Body, "value", "valuE", 1)
			}
			if tampered == vec.Body {
				t.Fatal("the tampering changed nothing")
			}
			switch vec.Type {
			case "gitlab":
				// A token does not cover the body: a wrong token is the only forgery.
			default:
				wantFail(t, v.Verify(vec.request(tampered, vec.now)), ErrNoMatch)
			}

			if vec.Type == "sendgrid" {
				other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
				der, _ := x509.MarshalPKIXPublicKey(&other.PublicKey)
				wrong := mustNew(t, Spec{Type: "sendgrid", PublicKey: Secrets{base64.StdEncoding.EncodeToString(der)}})
				wantFail(t, wrong.Verify(vec.request(vec.Body, vec.now)), ErrNoMatch)
			} else {
				wrongSecret := vec.Secret + "x"
				if strings.HasPrefix(vec.Secret, "whsec_") {
					wrongSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("wrong"))
				}
				wrong := mustNew(t, vec.spec(wrongSecret))
				wantFail(t, wrong.Verify(vec.request(vec.Body, vec.now)), ErrNoMatch)
			}

			if vec.Stamped() {
				wantFail(t, v.Verify(vec.request(vec.Body, vec.now.Add(time.Hour))), ErrTimestampOutOfWindow)
			}
		})
	}
}

// The Twilio published example also holds with the parameters in any order in the body, and a repeated
// parameter is sorted by value (twilio-python's test_compute_signature_duplicate_query_dict).
func TestTwilioSortsParameters(t *testing.T) {
	v := mustNew(t, Spec{Type: "twilio", Secret: Secrets{"12345"}, PublicURL: "https://mycompany.com/myapp.php"})
	r := request("To=%2B18005551212&From=%2B14158675310&Digits=1234&Caller=%2B14158675310&CallSid=CA1234567890ABCDE",
		headers{"X-Twilio-Signature": "GvWf1cFY/Q7PnoempGyD5oXAezc="}, time.Unix(0, 0))
	r.RawQuery = []byte("foo=1&bar=2")
	wantOK(t, v.Verify(r))
	r = request("Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234", headers{"X-Twilio-Signature": "IK+Dwps556ElfBT0I3Rgjkr1wJU="}, time.Unix(0, 0))
	r.RawQuery = []byte("foo=1&bar=2")
	wantOK(t, v.Verify(r))
	r.RawQuery = []byte("foo=1&bar=3")
	wantFail(t, v.Verify(r), ErrNoMatch)
	r.RawQuery = []byte("foo=1&bar=2")
	r.Body = []byte("Sid=CA123&Digits=%ZZ")
	wantFail(t, v.Verify(r), ErrNoMatch)
	r.Body = []byte(strings.Repeat("a=b&", maxTwilioParams+1))
	wantFail(t, v.Verify(r), ErrNoMatch)
}

// The URL presets need public_url; twilio's has no query string (the request's own is appended).
func TestPublicURLValidated(t *testing.T) {
	for _, c := range []struct {
		spec  Spec
		field string
	}{
		{Spec{Type: "square", Secret: Secrets{"k"}}, "public_url"},
		{Spec{Type: "twilio", Secret: Secrets{"k"}, PublicURL: "https://x.example/hook?a=1"}, "public_url"},
		{Spec{Type: "twilio", Secret: Secrets{"k"}, PublicURL: "ftp://x.example/hook"}, "public_url"},
		{Spec{Type: "github", Secret: Secrets{"k"}, PublicURL: "https://x.example/hook"}, "public_url"},
		{Spec{Type: "sendgrid", PublicKey: Secrets{"bm90IGEga2V5"}}, "public_key"},
		{Spec{Type: "gitlab", Secret: Secrets{"k"}, ToleranceSeconds: 10}, "tolerance_seconds"},
	} {
		ps := c.spec.Validate()
		if len(ps) != 1 || ps[0].Field != c.field {
			t.Errorf("%s: problems %v, want one on %s", c.spec.Type, ps, c.field)
		}
	}
	if ps := (&Spec{Type: "square", Secret: Secrets{"k"}, PublicURL: "https://x.example/{hook}"}).Validate(); len(ps) != 0 {
		t.Errorf("square with braces in its URL: %v", ps)
	}
}

// GitLab's token header is a credential: the edge drops it from what it stores.
func TestGitLabTokenIsACredentialHeader(t *testing.T) {
	if h := (Spec{Type: "gitlab"}).CredentialHeaders(); len(h) != 1 || h[0] != "x-gitlab-token" {
		t.Fatalf("CredentialHeaders = %v", h)
	}
}

// Linear's timestamp is in the body (milliseconds): refused before hashing when stale or absent.
func TestLinearBodyTimestamp(t *testing.T) {
	const secret = "s"
	now := time.Unix(1_750_000_000, 0)
	v := mustNew(t, Spec{Type: "linear", Secret: Secrets{secret}})
	sign := func(body string) headers { return headers{"Linear-Signature": hmacHex(sha256.New, secret, body)} }
	ok := `{"a":[1,{"b":"}"}],"webhookTimestamp":1750000030000}`
	wantOK(t, v.Verify(request(ok, sign(ok), now)))
	stale := `{"webhookTimestamp":1749999939000}`
	res := v.Verify(request(stale, sign(stale), now))
	wantFail(t, res, ErrTimestampOutOfWindow)
	if res.HashedBytes != 0 {
		t.Fatal("a stale Linear hook was hashed")
	}
	none := `{"action":"create"}`
	wantFail(t, v.Verify(request(none, sign(none), now)), ErrMissingTimestamp)
	wantFail(t, v.Verify(request(ok, nil, now)), ErrMissingSignature)
}

// providerRequest signs a body for a provider preset as the provider would, computed here independently
// of the engine: the benchmark's and the allocation test's valid request.
func providerRequest(t testing.TB, typ, secret, body string, now time.Time, ecKey *ecdsa.PrivateKey) (Spec, *Request) {
	t.Helper()
	ts := strconv.FormatInt(now.Unix(), 10)
	spec := Spec{Type: typ, Secret: Secrets{secret}}
	h := headers{}
	var query string
	switch typ {
	case "svix":
		spec.Secret = Secrets{"whsec_" + base64.StdEncoding.EncodeToString([]byte(secret))}
		h = headers{"svix-id": "msg_1", "svix-timestamp": ts, "svix-signature": "v1," + hmacB64([]byte(secret), "msg_1."+ts+"."+body)}
	case "zoom":
		h = headers{"x-zm-request-timestamp": ts, "x-zm-signature": "v0=" + hmacHex(sha256.New, secret, "v0:"+ts+":"+body)}
	case "paddle":
		h = headers{"Paddle-Signature": "ts=" + ts + ";h1=" + hmacHex(sha256.New, secret, ts+":"+body)}
	case "linear":
		body = body[:len(body)-1] + `,"webhookTimestamp":` + strconv.FormatInt(now.UnixMilli(), 10) + "}"
		h = headers{"Linear-Signature": hmacHex(sha256.New, secret, body)}
	case "intercom":
		h = headers{"X-Hub-Signature": "sha1=" + hmacHex(sha1New, secret, body)}
	case "typeform":
		h = headers{"Typeform-Signature": "sha256=" + hmacB64([]byte(secret), body)}
	case "pagerduty":
		h = headers{"X-PagerDuty-Signature": "v1=" + hmacHex(sha256.New, secret, body)}
	case "square":
		spec.PublicURL = "https://hooks.example.com/webhooks/square"
		h = headers{"x-square-hmacsha256-signature": hmacB64([]byte(secret), spec.PublicURL+body)}
	case "meta":
		h = headers{"X-Hub-Signature-256": "sha256=" + hmacHex(sha256.New, secret, body)}
	case "dropbox":
		h = headers{"X-Dropbox-Signature": hmacHex(sha256.New, secret, body)}
	case "twitter":
		h = headers{"X-Twitter-Webhooks-Signature": "sha256=" + hmacB64([]byte(secret), body)}
	case "twilio":
		// A form body of 1 KB: 16 parameters of 60-odd bytes.
		var b strings.Builder
		params := make([]string, 0, 16)
		for i := range 16 {
			k, v := "Param"+strconv.Itoa(15-i), strings.Repeat("v", 56)
			params = append(params, k+"\x00"+v) // sorted by name, then value
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(k + "=" + v)
		}
		body = b.String()
		spec.PublicURL = "https://hooks.example.com/webhooks/twilio"
		query = "a=1"
		slicesSort(params)
		for i, p := range params {
			params[i] = strings.Replace(p, "\x00", "", 1)
		}
		h = headers{"X-Twilio-Signature": base64.StdEncoding.EncodeToString(hmacRaw(sha1New, secret, spec.PublicURL+"?"+query+strings.Join(params, "")))}
	case "mailgun":
		tok := strings.Repeat("t", 50)
		body = `{"signature":{"timestamp":"` + ts + `","token":"` + tok + `","signature":"` + hmacHex(sha256.New, secret, ts+tok) + `"},"event-data":` + body + `}`
	case "gitlab":
		h = headers{"X-Gitlab-Token": secret}
	case "sendgrid":
		der, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
		spec = Spec{Type: typ, PublicKey: Secrets{base64.StdEncoding.EncodeToString(der)}}
		d := sha256.Sum256([]byte(ts + body))
		sig, err := ecdsa.SignASN1(rand.Reader, ecKey, d[:])
		if err != nil {
			t.Fatal(err)
		}
		h = headers{"X-Twilio-Email-Event-Webhook-Signature": base64.StdEncoding.EncodeToString(sig), "X-Twilio-Email-Event-Webhook-Timestamp": ts}
	default:
		t.Fatalf("no signer for %s", typ)
	}
	r := request(body, h, now)
	if query != "" {
		r.RawQuery = []byte(query)
	}
	return spec, r
}

// newPresets are the presets of docs/providers.md beyond inventory C.2's five.
var newPresets = []string{"svix", "zoom", "paddle", "linear", "intercom", "typeform", "pagerduty", "square",
	"meta", "dropbox", "twitter", "twilio", "mailgun", "gitlab", "sendgrid"}

// jsonKB is a 1 KB JSON body.
func jsonKB() string { return `{"id":"evt_1","data":"` + strings.Repeat("x", 1024-23) + `"}` }

// BenchmarkVerifyProviders measures one verification of a valid 1 KB hook per provider preset.
func BenchmarkVerifyProviders(b *testing.B) {
	now := time.Unix(1_750_000_000, 0)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, typ := range newPresets {
		b.Run(typ, func(b *testing.B) {
			spec, r := providerRequest(b, typ, "bench-secret", jsonKB(), now, ecKey)
			v := mustNew(b, spec)
			if res := v.Verify(r); res.Status != StatusOK {
				b.Fatalf("setup: %v", res.Reason)
			}
			b.SetBytes(int64(len(r.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if v.Verify(r).Status != StatusOK {
					b.Fatal("verification failed")
				}
			}
		})
	}
}

// providerPresetsAllocateNothing is TestVerifyAllocatesNothing's part for the provider presets: the HMAC
// and token ones allocate nothing per request, authentic or forged (doc.go invariant 4); SendGrid's ECDSA
// is the exception, as crypto/ecdsa allocates.
func providerPresetsAllocateNothing(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	for _, typ := range newPresets {
		if typ == "sendgrid" {
			continue
		}
		spec, r := providerRequest(t, typ, "k", jsonKB(), now, nil)
		v := mustNew(t, spec)
		if res := v.Verify(r); res.Status != StatusOK {
			t.Fatalf("%s: %v", typ, res.Reason)
		}
		if n := testing.AllocsPerRun(200, func() { v.Verify(r) }); n != 0 {
			t.Errorf("%s: %v allocs per authentic Verify, want 0", typ, n)
		}
		forgedSpec, _ := providerRequest(t, typ, "forger", jsonKB(), now, nil)
		forged := mustNew(t, forgedSpec)
		if res := forged.Verify(r); res.Status != StatusFailed {
			t.Fatalf("%s: a wrong key verified", typ)
		}
		if n := testing.AllocsPerRun(200, func() { forged.Verify(r) }); n != 0 {
			t.Errorf("%s: %v allocs per forged Verify, want 0", typ, n)
		}
	}
}

func sha1New() hash.Hash { return sha1.New() }

func hmacRaw(h func() hash.Hash, key, msg string) []byte {
	m := hmac.New(h, []byte(key))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func slicesSort(s []string) { slices.Sort(s) }
