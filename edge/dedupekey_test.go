package edge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ankusa-go/ankusa/config"
)

// headerLookup is a case-insensitive header lookup over name/value pairs, as the handler provides.
func headerLookup(kv ...string) func(string) []byte {
	m := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[strings.ToLower(kv[i])] = []byte(kv[i+1])
	}
	return func(name string) []byte { return m[strings.ToLower(name)] }
}

func mustExtractor(t testing.TB, spec config.DedupeSpec) *DedupeExtractor {
	t.Helper()
	if spec.TTLSeconds == 0 {
		spec.TTLSeconds = config.DefaultDedupeTTLSeconds
	}
	d, err := NewDedupeExtractor(spec)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Inventory C.5: "github → header x-github-delivery; standard_webhooks → webhook-id; svix → svix-id;
// shopify → x-shopify-webhook-id; stripe → JSON id".
func TestDedupePresetsReadTheProvidersEventKey(t *testing.T) {
	hdrs := headerLookup(
		"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"Webhook-Id", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
		"Svix-Id", "msg_svix_1",
		"X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
		"Id", "not-the-stripe-key",
	)
	body := []byte(`{"object":"event","data":{"object":{"id":"pi_1"}},"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"payment_intent.succeeded"}`)
	for preset, want := range map[string]string{
		"github":            "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"standard_webhooks": "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
		"svix":              "msg_svix_1",
		"shopify":           "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
		"stripe":            "evt_1NG8Du2eZvKYlo2CUI79vXWy",
	} {
		d := mustExtractor(t, config.DedupeSpec{Preset: preset})
		if got := d.Key(hdrs, body); got != want {
			t.Errorf("preset %s: key %q, want %q", preset, got, want)
		}
		if got := d.Key(headerLookup(), []byte(`{}`)); got != "" {
			t.Errorf("preset %s: key %q from a request without one", preset, got)
		}
	}
}

// Inventory C.5: custom "{header: name} (lowercased) or {json: "a.b"} (map keys only; string or integer
// value). Missing stamp/undecodable body → no key".
func TestDedupeCustomHeaderAndJSONPath(t *testing.T) {
	h := mustExtractor(t, config.DedupeSpec{Header: "X-Event-ID"})
	if got := h.Key(headerLookup("x-event-id", "e-1"), nil); got != "e-1" {
		t.Fatalf("custom header key %q", got)
	}
	if got := h.Key(headerLookup("x-event-id", ""), nil); got != "" {
		t.Fatalf("an empty header gave key %q", got)
	}
	if got := h.Key(nil, nil); got != "" {
		t.Fatalf("a nil lookup gave key %q", got)
	}

	j := mustExtractor(t, config.DedupeSpec{JSON: "data.event.id"})
	cases := map[string]string{
		`{"data":{"event":{"id":"abc"}}}`:                                          "abc",
		` { "data" : { "event" : { "id" : 12345 } } } `:                            "12345",
		`{"data":{"event":{"id":-7}}}`:                                             "-7",
		`{"data":{"event":{"id":-0}}}`:                                             "0",
		`{"data":{"event":{"id":123456789012345678901234567890}}}`:                 "123456789012345678901234567890",
		`{"data":{"event":{"id":1.5}}}`:                                            "",
		`{"data":{"event":{"id":1e3}}}`:                                            "",
		`{"data":{"event":{"id":true}}}`:                                           "",
		`{"data":{"event":{"id":null}}}`:                                           "",
		`{"data":{"event":{"id":{"x":1}}}}`:                                        "",
		`{"data":{"event":{"id":""}}}`:                                             "",
		`{"data":[{"event":{"id":"abc"}}]}`:                                        "", // map keys only
		`{"data":{"event":{}}}`:                                                    "",
		`[1,2]`:                                                                    "",
		`"abc"`:                                                                    "",
		`{"data":{"event":{"id":"abc"}}`:                                           "", // truncated
		`{"data":{"event":{"id":"abc"}}} trailing`:                                 "",
		`{"data":{"event":{"id":"abc"}}, "x": }`:                                   "", // damage after the key
		"{\"data\":{\"event\":{\"id\":\"ab\xffc\"}}}":                              "", // not UTF-8
		`{"data":{"event":{"id":"a\"b\\c\u00e9"}}}`:                                "a\"b\\cé",
		`{"d\u0061ta":{"event":{"\u0069d":"escaped-keys"}}}`:                       "escaped-keys",
		`{"data":{"event":{"id":"first"}},"data":{"event":{}}}`:                    "", // the last duplicate wins
		`{"data":{"event":{"id":"first","id":"second"}}}`:                          "second",
		`{"x":[{"data":"}"}],"data":{"skip":[1,{"a":"]"}],"event":{"id":"deep"}}}`: "deep",
		``: "",
	}
	for body, want := range cases {
		if got := j.Key(nil, []byte(body)); got != want {
			t.Errorf("body %s: key %q, want %q", body, got, want)
		}
	}
}

// Inventory C.5: "Key > 200 bytes → sha256:<hex>".
func TestDedupeKeyLongerThan200BytesIsHashed(t *testing.T) {
	d := mustExtractor(t, config.DedupeSpec{Header: "x-id"})
	exact := strings.Repeat("k", 200)
	if got := d.Key(headerLookup("x-id", exact), nil); got != exact {
		t.Fatalf("a 200-byte key was changed to %q", got)
	}
	long := exact + "!"
	sum := sha256.Sum256([]byte(long))
	if got, want := d.Key(headerLookup("x-id", long), nil), "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("201-byte key became %q, want %q", got, want)
	}
	j := mustExtractor(t, config.DedupeSpec{Preset: "stripe"})
	digits := strings.Repeat("9", 250)
	sum = sha256.Sum256([]byte(digits))
	if got, want := j.Key(nil, []byte(`{"id":`+digits+`}`)), "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("a long integer key became %q", got)
	}
}

// Inventory C.5: "TTL default 72 h (259 200 s)".
func TestDedupeTTL(t *testing.T) {
	if got := mustExtractor(t, config.DedupeSpec{Preset: "github"}).TTL(); got != 72*time.Hour {
		t.Fatalf("default TTL %v", got)
	}
	if got := mustExtractor(t, config.DedupeSpec{Preset: "github", TTLSeconds: 90}).TTL(); got != 90*time.Second {
		t.Fatalf("TTL %v", got)
	}
}

func TestNewDedupeExtractorRefusesWhatConfigRefuses(t *testing.T) {
	for _, spec := range []config.DedupeSpec{
		{TTLSeconds: 1},
		{Preset: "github", Header: "x-id", TTLSeconds: 1},
		{Preset: "bitbucket", TTLSeconds: 1},
		{JSON: "a..b", TTLSeconds: 1},
		{JSON: ".", TTLSeconds: 1},
		{Header: "x-id"},
		{Header: "x-id", TTLSeconds: -5},
	} {
		if _, err := NewDedupeExtractor(spec); !errors.Is(err, ErrBadTrust) {
			t.Errorf("%+v: err %v, want ErrBadTrust", spec, err)
		}
	}
}

// DESIGN §3: the dedupe key is CPU work in the request's goroutine; only the returned string allocates.
func TestDedupeKeyAllocatesOnlyTheKey(t *testing.T) {
	body := bytes.Repeat([]byte(` `), 2000)
	body = append(append([]byte(`{"object":"event","data":{"x":[1,2,"}"]},"id":"evt_1"`), body...), '}')
	j := mustExtractor(t, config.DedupeSpec{Preset: "stripe"})
	// json.Valid takes its scanner from a sync.Pool, which the race detector makes drop entries at random.
	if a := testing.AllocsPerRun(200, func() { j.Key(nil, body) }); a > 1 && poolKeepsItems() {
		t.Fatalf("JSON key: %v allocations", a)
	}
	h := mustExtractor(t, config.DedupeSpec{Preset: "github"})
	hdrs := headerLookup("x-github-delivery", "abc")
	if a := testing.AllocsPerRun(200, func() { h.Key(hdrs, nil) }); a > 1 {
		t.Fatalf("header key: %v allocations", a)
	}
}

// poolKeepsItems reports whether a sync.Pool hands back what it was given: false under the race detector,
// which drops a quarter of the puts.
func poolKeepsItems() bool {
	var p sync.Pool
	for i := 0; i < 100; i++ {
		p.Put(new(int))
		if p.Get() == nil {
			return false
		}
	}
	return true
}

// refJSONKey is the key the inventory's rule gives by decoding the whole body into maps.
func refJSONKey(body []byte, path []string) string {
	if !utf8.Valid(body) || !json.Valid(body) {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	for _, seg := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		if v, ok = m[seg]; !ok {
			return ""
		}
	}
	var k string
	switch x := v.(type) {
	case string:
		k = x
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return ""
		}
		k = string(x)
		if k == "-0" {
			k = "0"
		}
	}
	return dedupeKey([]byte(k))
}

// FuzzDedupeKey: Key never panics on any body or header, and the JSON scan agrees with decoding the
// whole body into maps.
func FuzzDedupeKey(f *testing.F) {
	for _, s := range []string{
		`{"id":"evt_1"}`, `{"id":12}`, `{"a":{"b":"c"}}`, `{"a":{"b":1.5}}`, `{"a":[{"b":"c"}]}`,
		`{"\u0061":{"b":"\ud800"}}`, `{"a":{"b":"x","b":"y"}}`, `{"a":{"b":"x"},"a":1}`, `{"id":"` + strings.Repeat("x", 300) + `"}`,
		`{`, `{"id"`, `{"id":"x"`, `"x"`, `[]`, `null`, ` {"id" : -0 } `, "{\"id\":\"\xff\"}",
	} {
		f.Add([]byte(s), "a.b", "x-id")
	}
	f.Fuzz(func(t *testing.T, body []byte, path, hdr string) {
		segs := strings.Split(path, ".")
		for _, s := range segs {
			if s == "" {
				return // refused by NewDedupeExtractor
			}
		}
		j := mustExtractor(t, config.DedupeSpec{JSON: path})
		if got, want := j.Key(nil, body), refJSONKey(body, segs); got != want {
			t.Fatalf("body %q path %q: key %q, decoding gives %q", body, path, got, want)
		}
		if got := mustExtractor(t, config.DedupeSpec{Preset: "stripe"}).Key(nil, body); got != refJSONKey(body, []string{"id"}) {
			t.Fatalf("stripe key %q disagrees with decoding", got)
		}
		h := mustExtractor(t, config.DedupeSpec{Header: "x-id"})
		k := h.Key(headerLookup("x-id", hdr), body)
		if len(k) > maxDedupeKey && len(hdr) <= maxDedupeKey || len(hdr) > maxDedupeKey && !strings.HasPrefix(k, "sha256:") {
			t.Fatalf("header %q: key %q", hdr, k)
		}
	})
}
