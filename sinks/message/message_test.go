package message

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
)

const (
	testID    = "0190f3c4-5b6a-7c8d-9e0f-112233445566"
	testClaim = "urn:ankusa:claim:v1:acme:01J9ZQ5K8E6VX2W4Y3T1R0P9M0"
)

func envelope(body string) *sinks.Envelope {
	return &sinks.Envelope{
		IDText: testID, Source: "github", Tenant: "acme", ReceivedAt: 1733212800123,
		ContentType: "application/json",
		Headers: []sinks.Header{
			{Name: "X-GitHub-Event", Value: "push"},
			{Name: "authorization", Value: "Bearer secret"},
			{Name: "x-multi", Value: "a"},
			{Name: "x-ankusa-id", Value: "spoofed"},
			{Name: "x-multi", Value: "b"},
		},
		Body: []byte(body), DedupeKey: "d-1", Verification: sinks.VerificationOK,
	}
}

func sum(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

// Inventory D.4: fields in a fixed order, byte-identical for every transport; forwarded headers lowercased,
// repeats joined ", "; credentials and x-ankusa-* never forwarded; absent optional fields null.
func TestEncodeFixedOrderForwardedHeadersAndNulls(t *testing.T) {
	got := string(Encode(nil, envelope(`{"a":1}`), Meta{Instance: "n1"}))
	want := `{"v":1,"id":"` + testID + `","source_id":"github","tenant_id":"acme","received_at":1733212800123,` +
		`"content_type":"application/json","size":7,"sha256":"` + sum(`{"a":1}`) + `","dedupe_key":"d-1",` +
		`"replay_id":null,"idempotency_key":"acme:github:d-1","headers":{"x-github-event":"push","x-multi":"a, b"},` +
		`"verification":"ok","instance":"n1","body_base64":"` + base64.StdEncoding.EncodeToString([]byte(`{"a":1}`)) + `"}`
	if got != want {
		t.Fatalf("Encode =\n%s\nwant\n%s", got, want)
	}

	e := &sinks.Envelope{IDText: testID, Source: "s", Claim: "urn:ankusa:claim:v1:default:01J9ZQ5K8E6VX2W4Y3T1R0P9M0", Body: []byte("xyz")}
	got = string(Encode([]byte("prefix:"), e, Meta{}))
	want = `prefix:{"v":1,"id":"` + testID + `","source_id":"s","tenant_id":null,"received_at":0,"content_type":null,` +
		`"size":3,"sha256":"` + sum("xyz") + `","dedupe_key":null,"replay_id":null,"idempotency_key":"` + testID + `",` +
		`"headers":{},"verification":null,"instance":null,"claim":"urn:ankusa:claim:v1:default:01J9ZQ5K8E6VX2W4Y3T1R0P9M0"}`
	if got != want {
		t.Fatalf("Encode (claim) =\n%s\nwant\n%s", got, want)
	}
}

// Caller-chosen strings are escaped so the document stays one valid JSON value, whatever the bytes.
func TestEncodeEscapesEveryString(t *testing.T) {
	e := envelope("")
	e.DedupeKey = "q\"\\\n\x00\u2028é\xff"
	e.Headers = []sinks.Header{{Name: "x-k", Value: "v\r\t"}}
	b := Encode(nil, e, Meta{Instance: "</script>"})
	if !json.Valid(b) {
		t.Fatalf("not valid JSON: %s", b)
	}
	if !bytes.Contains(b, []byte(`"dedupe_key":"q\"\\\n\u0000\u2028é\ufffd"`)) || !bytes.Contains(b, []byte(`"</script>"`)) {
		t.Fatalf("escaping: %s", b)
	}
	m, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.DedupeKey != "q\"\\\n\x00\u2028é\uFFFD" || m.Headers[0].Value != "v\r\t" {
		t.Fatalf("decoded %q %q", m.DedupeKey, m.Headers[0].Value)
	}
}

// Invariant of the package: Decode(Encode(e)) gives back every field, the body byte-exact.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	body := "\x00\xff binary \r\n"
	e := envelope(body)
	e.ReplayID = "r-9"
	m, err := Decode(Encode(nil, e, Meta{Instance: "n1"}))
	if err != nil {
		t.Fatal(err)
	}
	want := &Message{ID: testID, SourceID: "github", TenantID: "acme", ReceivedAt: 1733212800123,
		ContentType: "application/json", Size: int64(len(body)), SHA256: sum(body), DedupeKey: "d-1", ReplayID: "r-9",
		IdempotencyKey: "acme:github:d-1#replay:r-9",
		Headers:        []sinks.Header{{Name: "x-github-event", Value: "push"}, {Name: "x-multi", Value: "a, b"}},
		Verification:   "ok", Instance: "n1", body: []byte(body)}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("Decode =\n%+v\nwant\n%+v", m, want)
	}
	if !m.Inline() || string(m.Body()) != body {
		t.Fatal("inline body lost")
	}
	if again := m.Append(nil); !bytes.Equal(again, Encode(nil, e, Meta{Instance: "n1"})) {
		t.Fatalf("Append of the decoded message differs from Encode:\n%s", again)
	}

	e.Claim = testClaim
	m, err = Decode(Encode(nil, e, Meta{}))
	if err != nil {
		t.Fatal(err)
	}
	if m.Inline() || m.Body() != nil || m.Claim != testClaim || m.SHA256 != sum(body) || m.Size != int64(len(body)) {
		t.Fatalf("claimed message: %+v", m)
	}
}

// Inventory D.4: the decoder's error codes, one case (at least) per code.
func TestDecodeErrorCodes(t *testing.T) {
	good := func(edit func(map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(Encode(nil, envelope("hello"), Meta{}), &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, _ := json.Marshal(m)
		return b
	}
	for name, c := range map[string]struct {
		in    []byte
		code  Code
		field string
	}{
		"not json":         {[]byte(`{"v":1`), CodeInvalidJSON, ""},
		"empty":            {nil, CodeInvalidJSON, ""},
		"array":            {[]byte(`[1]`), CodeNotAnObject, ""},
		"string":           {[]byte(` "x"`), CodeNotAnObject, ""},
		"no v":             {good(func(m map[string]any) { delete(m, "v") }), CodeUnsupportedVersion, ""},
		"v 2":              {good(func(m map[string]any) { m["v"] = 2; delete(m, "id") }), CodeUnsupportedVersion, ""},
		"v string":         {good(func(m map[string]any) { m["v"] = "1" }), CodeUnsupportedVersion, ""},
		"v float":          {good(func(m map[string]any) { m["v"] = 1.5 }), CodeUnsupportedVersion, ""},
		"no id":            {good(func(m map[string]any) { delete(m, "id") }), CodeInvalidField, "id"},
		"id number":        {good(func(m map[string]any) { m["id"] = 7 }), CodeInvalidField, "id"},
		"empty source":     {good(func(m map[string]any) { m["source_id"] = "" }), CodeInvalidField, "source_id"},
		"negative size":    {good(func(m map[string]any) { m["size"] = -1 }), CodeInvalidField, "size"},
		"fractional time":  {good(func(m map[string]any) { m["received_at"] = 1.5 }), CodeInvalidField, "received_at"},
		"upper hex":        {good(func(m map[string]any) { m["sha256"] = strings.ToUpper(sum("hello")) }), CodeInvalidField, "sha256"},
		"tenant object":    {good(func(m map[string]any) { m["tenant_id"] = map[string]any{} }), CodeInvalidField, "tenant_id"},
		"headers array":    {good(func(m map[string]any) { m["headers"] = []any{"a"} }), CodeInvalidField, "headers"},
		"header number":    {good(func(m map[string]any) { m["headers"] = map[string]any{"a": 1} }), CodeInvalidField, "headers"},
		"duplicate key":    {append(good(func(map[string]any) {})[:1:1], `"id":"x",`+string(good(func(map[string]any) {})[1:])...), CodeInvalidField, "id"},
		"duplicate header": {[]byte(strings.Replace(string(good(func(m map[string]any) { m["headers"] = map[string]any{"a": "1"} })), `"headers":{"a":"1"}`, `"headers":{"a":"1","a":"2"}`, 1)), CodeInvalidField, "headers"},
		"both bodies":      {good(func(m map[string]any) { m["claim"] = testClaim }), CodeAmbiguousBody, ""},
		"no body":          {good(func(m map[string]any) { delete(m, "body_base64") }), CodeMissingBody, ""},
		"null body":        {good(func(m map[string]any) { m["body_base64"] = nil }), CodeMissingBody, ""},
		"bad base64":       {good(func(m map[string]any) { m["body_base64"] = "aGVsbG8=!" }), CodeInvalidBodyBase64, "body_base64"},
		"unpadded base64":  {good(func(m map[string]any) { m["body_base64"] = "aGVsbG8" }), CodeInvalidBodyBase64, "body_base64"},
		"body number":      {good(func(m map[string]any) { m["body_base64"] = 5 }), CodeInvalidField, "body_base64"},
		"size":             {good(func(m map[string]any) { m["size"] = 6 }), CodeSizeMismatch, ""},
		"integrity":        {good(func(m map[string]any) { m["sha256"] = sum("hellO") }), CodeIntegrity, ""},
		"bad claim":        {good(func(m map[string]any) { delete(m, "body_base64"); m["claim"] = "urn:ankusa:claim:v1:acme:nope" }), CodeInvalidField, "claim"},
		"old claim format": {good(func(m map[string]any) { delete(m, "body_base64"); m["claim"] = "urn:ankusa:claim:acme:x:0:5:sha256-ab" }), CodeInvalidField, "claim"},
		"claim other tenant": {good(func(m map[string]any) {
			delete(m, "body_base64")
			m["claim"] = "urn:ankusa:claim:v1:evil:01J9ZQ5K8E6VX2W4Y3T1R0P9M0"
		}), CodeTenantMismatch, "claim"},
		"claim null tenant":  {good(func(m map[string]any) { delete(m, "body_base64"); m["tenant_id"] = nil; m["claim"] = testClaim }), CodeTenantMismatch, "claim"},
		"claim not a string": {good(func(m map[string]any) { delete(m, "body_base64"); m["claim"] = true }), CodeInvalidField, "claim"},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := Decode(c.in)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode = %+v, %v; want a *DecodeError %s", m, err, c.code)
			}
			if de.Code != c.code || de.Field != c.field {
				t.Fatalf("Decode error = %v (code %s, field %q), want code %s field %q", err, de.Code, de.Field, c.code, c.field)
			}
		})
	}
}

// Consumers ignore unknown keys (inventory D.4), and a null tenant's claim is in the default tenant.
func TestDecodeIgnoresUnknownKeys(t *testing.T) {
	b := Encode(nil, envelope("x"), Meta{})
	b = append([]byte(`{"region":"eu","future":{"a":[1,2]},`), b[1:]...)
	m, err := Decode(b)
	if err != nil || string(m.Body()) != "x" {
		t.Fatalf("Decode = %v, %v", m, err)
	}
	e := envelope("x")
	e.Tenant, e.Claim = "", "urn:ankusa:claim:v1:default:01J9ZQ5K8E6VX2W4Y3T1R0P9M0"
	if _, err := Decode(Encode(nil, e, Meta{})); err != nil {
		t.Fatalf("claim of a hook without tenant: %v", err)
	}
}

// Inventory D.4 broker header set; STYLE: a caller-controlled value becoming a header is encoded at the
// boundary.
func TestAttributes(t *testing.T) {
	e := envelope("x")
	e.DedupeKey = "k\n\x00"
	got := Attributes(e)
	want := []sinks.Header{
		{Name: AttrID, Value: testID}, {Name: AttrSourceID, Value: "github"}, {Name: AttrTenantID, Value: "acme"},
		{Name: AttrVersion, Value: "1"}, {Name: AttrIdempotencyKey, Value: "acme:github:k%0A%00"},
		{Name: AttrContentType, Value: "application/json"}, {Name: AttrDedupeKey, Value: "k%0A%00"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Attributes =\n%v\nwant\n%v", got, want)
	}
	e.DedupeKey, e.Tenant, e.ContentType, e.ReplayID = "", "", "", "r1"
	got = Attributes(e)
	want = []sinks.Header{{Name: AttrID, Value: testID}, {Name: AttrSourceID, Value: "github"}, {Name: AttrVersion, Value: "1"},
		{Name: AttrIdempotencyKey, Value: testID + "#replay:r1"}, {Name: AttrReplayID, Value: "r1"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Attributes (no tenant, replay) =\n%v\nwant\n%v", got, want)
	}
}

func TestParseClaimRef(t *testing.T) {
	tenant, id, err := ParseClaimRef(testClaim)
	if err != nil || tenant != "acme" || id != "01J9ZQ5K8E6VX2W4Y3T1R0P9M0" || ClaimRef(tenant, id) != testClaim {
		t.Fatalf("ParseClaimRef = %q %q %v", tenant, id, err)
	}
	for _, bad := range []string{
		"", "urn:ankusa:claim:v1:", "urn:ankusa:claim:v1:acme", "urn:ankusa:claim:v1::01J9ZQ5K8E6VX2W4Y3T1R0P9M0",
		"urn:ankusa:claim:v1:a/b:01J9ZQ5K8E6VX2W4Y3T1R0P9M0", "urn:ankusa:claim:v1:acme:81J9ZQ5K8E6VX2W4Y3T1R0P9M0",
		"urn:ankusa:claim:v1:acme:01j9zq5k8e6vx2w4y3t1r0p9m0", "urn:ankusa:claim:v1:acme:01J9ZQ5K8E6VX2W4Y3T1R0P9MI",
		"urn:ankusa:claim:v1:" + strings.Repeat("t", 65) + ":01J9ZQ5K8E6VX2W4Y3T1R0P9M0",
	} {
		if _, _, err := ParseClaimRef(bad); !errors.Is(err, ErrNotClaim) {
			t.Errorf("ParseClaimRef(%q) = %v, want ErrNotClaim", bad, err)
		}
	}
}

// gateway follows the claim gateway contract (inventory D.5: GET /v1/claims/<tenant>/<claim_id>, bearer
// token): it serves claims[tenant/id] to the right token.
type gateway struct {
	token  string
	claims map[string]string
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.Header.Get("Authorization") != "Bearer "+g.token {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	key, ok := strings.CutPrefix(r.URL.Path, ClaimPath)
	b, found := g.claims[key]
	if !ok || !found {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write([]byte(b))
}

// Inventory D.5: a consumer redeems a claim from the gateway and gets the body only when it matches the
// message's size and sha256.
func TestRedeem(t *testing.T) {
	const body = "a claimed body \x00\xff"
	g := &gateway{token: "tok", claims: map[string]string{
		"acme/01J9ZQ5K8E6VX2W4Y3T1R0P9M0": body,
		"acme/01J9ZQ5K8E6VX2W4Y3T1R0P9M1": "a claimed body \x00\xfe",            // same size, other bytes
		"acme/01J9ZQ5K8E6VX2W4Y3T1R0P9M2": body + strings.Repeat("more", 1<<20), // longer than size
		"acme/01J9ZQ5K8E6VX2W4Y3T1R0P9M3": "short",
	}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	msg := func(claimID, tenant string) *Message {
		e := envelope(body)
		e.Tenant = tenant
		e.Claim = ClaimRef("acme", claimID)
		m, err := Decode(Encode(nil, e, Meta{}))
		if err != nil && tenant == "acme" {
			t.Fatal(err)
		}
		if m == nil { // a tenant mismatch Decode refuses; build it by hand for Redeem's own check
			m = &Message{TenantID: tenant, Claim: e.Claim, Size: int64(len(body)), SHA256: sum(body)}
		}
		return m
	}
	ctx := context.Background()
	got, err := Redeem(ctx, srv.Client(), srv.URL+"/", "tok", msg("01J9ZQ5K8E6VX2W4Y3T1R0P9M0", "acme"))
	if err != nil || string(got) != body {
		t.Fatalf("Redeem = %q, %v", got, err)
	}
	code := func(err error) Code {
		var de *DecodeError
		if errors.As(err, &de) {
			return de.Code
		}
		return ""
	}
	if _, err := Redeem(ctx, srv.Client(), srv.URL, "tok", msg("01J9ZQ5K8E6VX2W4Y3T1R0P9M1", "acme")); code(err) != CodeIntegrity {
		t.Fatalf("other bytes: %v, want integrity", err)
	}
	if _, err := Redeem(ctx, srv.Client(), srv.URL, "tok", msg("01J9ZQ5K8E6VX2W4Y3T1R0P9M2", "acme")); code(err) != CodeSizeMismatch {
		t.Fatalf("longer body: %v, want size_mismatch", err)
	}
	if _, err := Redeem(ctx, srv.Client(), srv.URL, "tok", msg("01J9ZQ5K8E6VX2W4Y3T1R0P9M3", "acme")); code(err) != CodeSizeMismatch {
		t.Fatalf("short body: %v, want size_mismatch", err)
	}
	if _, err := Redeem(ctx, srv.Client(), srv.URL, "tok", msg("01J9ZQ5K8E6VX2W4Y3T1R0P9M9", "acme")); !errors.Is(err, ErrClaimNotFound) {
		t.Fatalf("unknown claim: %v, want ErrClaimNotFound", err)
	}
	if _, err := Redeem(ctx, srv.Client(), srv.URL, "bad", msg("01J9ZQ5K8E6VX2W4Y3T1R0P9M0", "acme")); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v, want the 401 named", err)
	}
	if _, err := Redeem(ctx, srv.Client(), srv.URL, "tok", msg("01J9ZQ5K8E6VX2W4Y3T1R0P9M0", "other")); code(err) != CodeTenantMismatch {
		t.Fatalf("tenant mismatch: %v", err)
	}
	inline, err := Decode(Encode(nil, envelope("inline"), Meta{}))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Redeem(ctx, nil, "http://unused.invalid", "", inline); err != nil || string(got) != "inline" {
		t.Fatalf("inline Redeem = %q, %v", got, err)
	}
}
