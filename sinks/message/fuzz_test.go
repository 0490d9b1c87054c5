package message

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ankusa-go/ankusa/sinks"
)

// Decode never panics, and what it accepts survives Append → Decode unchanged.
func FuzzDecode(f *testing.F) {
	e := envelope("seed body")
	f.Add(Encode(nil, e, Meta{Instance: "n1"}))
	e.Claim = testClaim
	f.Add(Encode(nil, e, Meta{}))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":1,"id":"a","source_id":"s","received_at":0,"size":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","idempotency_key":"a","body_base64":""}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("Decode error %T is not a *DecodeError: %v", err, err)
			}
			return
		}
		again, err := Decode(m.Append(nil))
		if err != nil {
			t.Fatalf("re-encoded message refused: %v", err)
		}
		if !equalMessages(m, again) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", m, again)
		}
	})
}

// Encode → Decode gives back the envelope's fields, the body byte-exact, for any field bytes.
func FuzzEncodeRoundTrip(f *testing.F) {
	f.Add("id", "src", "acme", "dk", "", "ok", "X-A", "v\x00", []byte("body"), false)
	f.Add("", "s", "", "", "r", "", "authorization", "secret", []byte{0xff}, true)
	f.Fuzz(func(t *testing.T, id, source, tenant, dedupe, replay, verification, hname, hvalue string, body []byte, claim bool) {
		e := &sinks.Envelope{IDText: id, Source: source, Tenant: tenant, DedupeKey: dedupe, ReplayID: replay,
			Verification: verification, ReceivedAt: int64(len(body)), Body: body,
			Headers: []sinks.Header{{Name: hname, Value: hvalue}, {Name: hname, Value: hvalue}}}
		if claim {
			e.Claim = ClaimRef(tenantOrDefault(tenant), "01J9ZQ5K8E6VX2W4Y3T1R0P9M0")
		}
		b := Encode(nil, e, Meta{Instance: "n"})
		m, err := Decode(b)
		if e.Text() == "" || source == "" || (claim && !ValidTenant(tenantOrDefault(tenant))) {
			if err == nil {
				t.Fatal("Decode accepted a message without id or source, or with an impossible claim")
			}
			return
		}
		if err != nil {
			t.Fatalf("Decode(Encode) = %v\n%s", err, b)
		}
		if m.ID != sanitize(e.Text()) || m.SourceID != sanitize(source) || m.TenantID != sanitize(tenant) ||
			m.DedupeKey != sanitize(dedupe) || m.ReplayID != sanitize(replay) || m.Verification != sanitize(verification) ||
			m.IdempotencyKey != sanitize(e.IdempotencyKey()) || m.Size != int64(len(body)) || m.Instance != "n" {
			t.Fatalf("fields changed: %+v from %+v", m, e)
		}
		if claim != !m.Inline() || (!claim && !bytes.Equal(m.Body(), body)) {
			t.Fatalf("body changed (claim %v)", claim)
		}
		fwd := sinks.Forward{Proxy: true}.Headers(e.Headers)
		if len(fwd) > 0 {
			want := []sinks.Header{{Name: sanitize(fwd[0].Name), Value: sanitize(hvalue) + ", " + sanitize(hvalue)}}
			if !reflect.DeepEqual(m.Headers, want) {
				t.Fatalf("headers %v, want %v", m.Headers, want)
			}
		} else if len(m.Headers) != 0 {
			t.Fatalf("headers %v forwarded past the filter", m.Headers)
		}
	})
}

// sanitize is what a JSON string can carry of s: each invalid UTF-8 byte becomes U+FFFD.
func sanitize(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func equalMessages(a, b *Message) bool {
	if len(a.Headers) == 0 && len(b.Headers) == 0 {
		a2, b2 := *a, *b
		a2.Headers, b2.Headers = nil, nil
		a, b = &a2, &b2
	}
	return reflect.DeepEqual(a, b)
}
