package load

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// The 201 body is {"status":"accepted","id":"<uuidv7>"} or, for a deduplicated
// hook, {"status":"accepted","id":"<original id>","duplicate":true} (inventory A.3):
// the driver must read the id and the flag from either.
func TestParseAckReadsIDAndDuplicate(t *testing.T) {
	f := func(body, wantID string, wantDup, wantOK bool) {
		t.Helper()
		id, dup, ok := parseAck([]byte(body))
		if string(id) != wantID || dup != wantDup || ok != wantOK {
			t.Errorf("parseAck(%s) = %q,%v,%v; want %q,%v,%v", body, id, dup, ok, wantID, wantDup, wantOK)
		}
	}
	const id = "0190a6c4-7d2e-7b3c-9f00-0123456789ab"
	f(`{"status":"accepted","id":"`+id+`"}`, id, false, true)
	f(`{"status":"accepted","id":"`+id+`","duplicate":true}`, id, true, true)
	f(`{"status":"accepted","id":"`+id+`","duplicate":false}`, id, false, true)
	f(`{ "duplicate" : true , "id" : "`+id+`" }`, id, true, true)
	f(`{"status":"id","id":"x"}`, "x", false, true)      // the key text as a value is skipped
	f(`{"id":"a\"b"}`, `a"b`, false, true)               // escapes go through encoding/json
	f(`{"status":"accepted"}`, "", false, false)         // no id
	f(`{"status":"accepted","id":""}`, "", false, false) // empty id
	f(`{"status":"accepted","id":12}`, "", false, false) // not a string
	f(`not json`, "", false, false)                      // garbage
	f(``, "", false, false)                              // empty
}

// The scan and encoding/json agree on every flat JSON object with unique keys (the
// shape of every ack); they may differ on nested or repeated keys, which no ack has.
func FuzzParseAckAgreesWithJSON(f *testing.F) {
	f.Add([]byte(`{"status":"accepted","id":"0190a6c4-7d2e-7b3c-9f00-0123456789ab"}`))
	f.Add([]byte(`{"status":"accepted","id":"x","duplicate":true}`))
	f.Add([]byte(`{"id":"a\"b","duplicate":false}`))
	f.Add([]byte(`{"status":"id" ,"id" : "y"}`))
	f.Add([]byte(`{"\u0069d":"z","ID":"w"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		wantID, wantDup, judged := flatAck(body)
		if !judged {
			return
		}
		id, dup, ok := parseAck(body)
		if wantID == "" {
			if ok {
				t.Fatalf("parseAck(%q) found id %q where encoding/json finds none", body, id)
			}
			return
		}
		if !ok || string(id) != wantID || dup != wantDup {
			t.Fatalf("parseAck(%q) = %q,%v,%v; encoding/json says %q,%v", body, id, dup, ok, wantID, wantDup)
		}
	})
}

// flatAck decodes body with encoding/json when it is valid UTF-8 JSON, an object of
// unique keys and scalar values; judged is false otherwise.
func flatAck(body []byte) (id string, dup, judged bool) {
	if !json.Valid(body) || !utf8.Valid(body) {
		return "", false, false
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return "", false, false
	}
	seen := map[string]bool{}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return "", false, false
		}
		key := k.(string)
		if seen[key] {
			return "", false, false
		}
		seen[key] = true
		v, err := d.Token()
		if err != nil {
			return "", false, false
		}
		switch v := v.(type) {
		case json.Delim:
			return "", false, false
		case string:
			if key == "id" {
				id = v
			}
		case bool:
			if key == "duplicate" {
				dup = v
			}
		}
	}
	return id, dup, true
}

func BenchmarkParseAck(b *testing.B) {
	body := []byte(`{"status":"accepted","id":"0190a6c4-7d2e-7b3c-9f00-0123456789ab"}`)
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := parseAck(body); !ok {
				b.Fatal("no id")
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		var a struct {
			ID        string `json:"id"`
			Duplicate bool   `json:"duplicate"`
		}
		for b.Loop() {
			if err := json.Unmarshal(body, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
}
