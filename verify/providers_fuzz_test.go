package verify

import (
	"encoding/json"
	"testing"
)

// jsonField never panics, and on a body encoding/json accepts as an object, what it finds is a member
// encoding/json also has, and a well-formed JSON value.
func FuzzJSONField(f *testing.F) {
	f.Add([]byte(`{"webhookTimestamp":1750000000000,"a":{"b":[1,"}"]}}`), "webhookTimestamp")
	f.Add([]byte(`{"signature":{"timestamp":"1","token":"t","signature":"ab"}}`), "signature")
	f.Add([]byte(`{"a":"\\"}","b":"x"}`), "b")
	f.Add([]byte(`[`), "a")
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		raw, ok := jsonField(body, key)
		var m map[string]json.RawMessage
		if !ok || json.Unmarshal(body, &m) != nil {
			return
		}
		if _, present := m[key]; !present {
			t.Fatalf("jsonField found %q = %q, encoding/json has no such member", key, raw)
		}
		if !json.Valid(raw) {
			t.Fatalf("jsonField returned %q, not a JSON value", raw)
		}
	})
}

// The bespoke provider verifiers (twilio's form and query parsing, mailgun's body signature, linear's body
// timestamp, sendgrid's DER signature) never panic and never verify under two unrelated keys.
func FuzzVerifyProviders(f *testing.F) {
	f.Add([]byte("CallSid=CA1&Caller=%2B1"), "foo=1&bodySHA256=00", "GvWf1cFY/Q7PnoempGyD5oXAezc=", "1750000000")
	f.Add([]byte(`{"signature":{"timestamp":"1750000000","token":"t","signature":"00"},"webhookTimestamp":1750000000000}`), "", "MEUCIQ==", "x")
	f.Add([]byte("a=%"), "%%", "", "")
	f.Fuzz(func(t *testing.T, body []byte, query, sig, ts string) {
		h := map[string]string{
			"x-twilio-signature": sig, "linear-signature": sig,
			"x-twilio-email-event-webhook-signature": sig, "x-twilio-email-event-webhook-timestamp": ts,
		}
		r := hdrRequest(body, h)
		r.RawQuery = []byte(query)
		for _, typ := range []string{"twilio", "mailgun", "linear"} {
			mk := func(k string) Verifier {
				return mustNewFuzz(t, Spec{Type: typ, Secret: Secrets{k}, PublicURL: publicURLFor(typ)})
			}
			fuzzPair(t, mk("k1"), mk("k2"), r)
		}
		checkResult(t, fuzzSendGrid(t).Verify(r))
	})
}

func mustNewFuzz(t *testing.T, s Spec) Verifier {
	v, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func publicURLFor(typ string) string {
	if typ == "twilio" {
		return "https://hooks.example.com/twilio"
	}
	return ""
}

// fuzzSendGrid is a SendGrid verifier holding the sendgrid-go test key.
func fuzzSendGrid(t *testing.T) Verifier {
	return mustNewFuzz(t, Spec{Type: "sendgrid", PublicKey: Secrets{"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="}})
}
