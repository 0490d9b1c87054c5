package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ankusa-go/ankusa/verify"
)

// edPub is a valid Ed25519 public key (base64), for specs that need one.
const edPub = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="

// src wraps source keys into a one-source document with a valid sink.
func src(keys string) string {
	return "sources:\n  gh:\n    sinks: [{type: log}]\n" + indent(keys, "    ")
}

func indent(s, pad string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// Inventory B.1: "strict schema walk (unknown key, wrong type, bad enum → error naming the dotted path)".
// Every refusal of the trust keys names the key that is wrong.
func TestTrustRefusalsNameTheirKeyPath(t *testing.T) {
	cases := []struct{ yml, path, msg string }{
		// sources.<id>.verify: verify.Spec.Validate's problems, prefixed with the key path.
		{src("verify: {type: gihub}"), "sources.gh.verify.type", "unknown verifier type"},
		{src("verify: {type: github}"), "sources.gh.verify.secret", "required"},
		{src("verify: {type: github, secret: [new, '${OLD:-}']}"), "sources.gh.verify.secret[1]", "must not be empty"},
		{src("verify: {type: github, secret: s, public_key: k}"), "sources.gh.verify.public_key", "not used by type github"},
		{src("verify: {type: github, secret: {a: b}}"), "sources.gh.verify.secret", "must be a string or a list"},
		{src("verify: {type: github, secret: [[a]]}"), "sources.gh.verify.secret", "entry 0 must be a string"},
		{src("verify: {tpye: github}"), "sources.gh.verify.tpye", "unknown key"},
		{src("verify: github"), "sources.gh.verify", "must be a mapping"},
		// A replay window must be bounded, and judged only by a timestamp the signature covers.
		{src("verify: {type: stripe, secret: s, tolerance_seconds: 86401}"), "sources.gh.verify.tolerance_seconds", "must be 0 (the default, 300) to 86400, got 86401"},
		{src("verify: {type: hmac, secret: s, signature_header: X-Sig, timestamp_header: X-Ts}"), "sources.gh.verify.timestamp_header", "the timestamp is not signed"},
		{src("verify: {type: hmac, secret: s, signature_header: X-Sig, parse: csv_pairs, sig_key: v1, timestamp_field: t, signed: '{body}'}"), "sources.gh.verify.timestamp_field", "the timestamp is not signed"},
		{src("verify_failure_bytes: {rate: 1000}"), "sources.gh.verify_failure_bytes.burst", "required"},
		// The tenants a URL may name for a shared source.
		{"http: {max_url_tenants: 0}", "http.max_url_tenants", "must be > 0, got 0"},
		{src("url_tenants: [acme, 'a b']"), "sources.gh.url_tenants[1]", "must be a tenant id"},
		{src("tenant: acme\nurl_tenants: [beta]"), "sources.gh.url_tenants", "only for a shared source"},
		{src("verify: {type: github, secret: s}\nurl_tenants: [acme]\ntenant_secrets: {acme: s1}"), "sources.gh.url_tenants", "not both"},
		{src("tenant_secrets: {acme: s1}"), "sources.gh.tenant_secrets", "only for a source that verifies a signature"},
		{src("verify: {type: github, secret: s}\ntenant_secrets: {acme: [s1, '']}"), "sources.gh.tenant_secrets.acme[1]", "must not be empty"},
		{src("verify: {type: ed25519, public_key: " + edPub + "}\ntenant_secrets: {acme: not-a-key}"), "sources.gh.tenant_secrets.acme", "Ed25519 public key"},
		// Provider handshakes (docs/providers.md) and the URL presets.
		{src("handshake: slak"), "sources.gh.handshake", `must be one of none|slack|zoom|twitter|meta|dropbox|msgraph, got "slak"`},
		{src("verify: {type: github, secret: s}\nhandshake: slack"), "sources.gh.handshake", "needs verify.type slack"},
		{src("handshake: meta"), "sources.gh.handshake_token", "required with handshake meta"},
		{src("handshake: dropbox\nhandshake_token: t"), "sources.gh.handshake_token", "only with handshake meta"},
		{src("verify: {type: square, secret: s}"), "sources.gh.verify.public_url", "required"},
		{src("verify: {type: twilio, secret: s, public_url: 'https://x.example/a?b=1'}"), "sources.gh.verify.public_url", "must not carry a query string"},
		// on_verify_failure
		{src("on_verify_failure: drop"), "sources.gh.on_verify_failure", `must be one of reject|quarantine|accept_flag, got "drop"`},
		// dedupe
		{src("dedupe: gihub"), "sources.gh.dedupe.preset", `must be one of github|standard_webhooks|svix|shopify|stripe|twilio|paddle|linear|intercom|typeform|pagerduty|square|mailgun|gitlab, got "gihub"`},
		{src("dedupe: {header: x-id, json: id}"), "sources.gh.dedupe", "exactly one of preset, header or json"},
		{src("dedupe: {ttl_seconds: 60}"), "sources.gh.dedupe", "exactly one of preset, header or json"},
		{src("dedupe: {header: 'x id'}"), "sources.gh.dedupe.header", "must be a header name"},
		{src("dedupe: {json: 'data..id'}"), "sources.gh.dedupe.json", "dot-separated"},
		{src("dedupe: {preset: stripe, ttl_seconds: 0}"), "sources.gh.dedupe.ttl_seconds", "must be > 0, got 0"},
		{src("dedupe: {preset: stripe, ttl_seconds: soon}"), "sources.gh.dedupe.ttl_seconds", "must be an integer"},
		{src("dedupe: {preset: stripe, tll_seconds: 5}"), "sources.gh.dedupe.tll_seconds", "unknown key"},
		{src("dedupe: [github]"), "sources.gh.dedupe", "must be a preset name or a mapping, got a list"},
		{src("dedupe: 5"), "sources.gh.dedupe", "must be a preset name or a mapping"},
		// store_headers
		{src("store_headers: {mode: keep}"), "sources.gh.store_headers.mode", `must be one of drop|hash, got "keep"`},
		{src("store_headers: {extra: [x-ok, 'bad:name']}"), "sources.gh.store_headers.extra[1]", "must be a header name"},
		{src("store_headers: {extras: []}"), "sources.gh.store_headers.extras", "unknown key"},
		// trust_url_tenant
		{src("trust_url_tenant: 1"), "sources.gh.trust_url_tenant", "must be a boolean"},
		// rate_limits
		{"rate_limits: {default: {rate: 5}}", "rate_limits.default.burst", "required when rate_limits.default is set"},
		{"rate_limits: {default: {burst: 5}}", "rate_limits.default.rate", "required when rate_limits.default is set"},
		{"rate_limits: {default: {rate: -1, burst: 5}}", "rate_limits.default.rate", "must be a finite number > 0, got -1"},
		{"rate_limits: {default: {rate: .inf, burst: 5}}", "rate_limits.default.rate", "must be a finite number > 0"},
		{"rate_limits: {default: {rate: .nan, burst: 5}}", "rate_limits.default.rate", "must be a finite number > 0"},
		{"rate_limits: {default: {rate: 1, burst: 0.5}}", "rate_limits.default.burst", "must be a finite number >= 1, got 0.5"},
		{"rate_limits: {default: {rate: 1, burst: 5, per: 2}}", "rate_limits.default.per", "unknown key"},
		{"rate_limits: {ip: {rate: 0.5}}", "rate_limits.ip.burst", "required"},
		{"rate_limits: {node: {rate: 10, burst: -3}}", "rate_limits.node.burst", "must be a finite number >= 1"},
		{"rate_limits: {source_bytes: {rate: 1e6, burst: 1000}}", "rate_limits.source_bytes.burst", ">= http.max_body_bytes"},
		{"rate_limits: {scope: fleet}", "fleet.store.addr", "required when"},
		{"rate_limits: {scope: cluster}", "rate_limits.scope", "must be one of node|fleet"},
		{"rate_limits: {tenants: {'a b': {rate: 1, burst: 1}}}", "rate_limits.tenants.a b", "tenant id must match"},
		{"rate_limits: {tenants: {acme: {rate: 1}}}", "rate_limits.tenants.acme.burst", "required with rate and burst"},
		{"rate_limits: {tenants: {acme: {bytes_burst: 9e6}}}", "rate_limits.tenants.acme.bytes_rate", "required with bytes_rate and bytes_burst"},
		{"rate_limits: {tenants: {acme: {bytes_rate: 1e6, bytes_burst: 1e3}}}", "rate_limits.tenants.acme.bytes_burst", "max body bytes"},
		{"rate_limits: {tenants: {acme: {max_body_bytes: -1}}}", "rate_limits.tenants.acme.max_body_bytes", "must be >= 0"},
		{"rate_limits: {tenants: {acme: {max_body_bytes: 9000000}}}", "rate_limits.tenants.acme.max_body_bytes", "<= http.max_body_bytes"},
		{"rate_limits: {tenants: {acme: {max_queue: -1}}}", "rate_limits.tenants.acme.max_queue", "must be >= 0"},
		{"rate_limits: {tenants: {acme: {max_queue_bytes: -1}}}", "rate_limits.tenants.acme.max_queue_bytes", "must be >= 0"},
		{"rate_limits: {tenants: {acme: {max_queue: 1.5}}}", "rate_limits.tenants.acme.max_queue", "must be an integer"},
		// quarantine
		{"quarantine: {burst: 0}", "quarantine.burst", "must be >= 1, got 0"},
		{"quarantine: {rate: 0}", "quarantine.rate", "must be > 0, got 0"},
		{"quarantine: {rate: .inf}", "quarantine.rate", "must be > 0"},
		{"quarantine: {max_bytes: 0}", "quarantine.max_bytes", "must be > 0, got 0"},
		{"quarantine: {max_pending: -1}", "quarantine.max_pending", "must be > 0, got -1"},
		{"quarantine: {max_pendng: 5}", "quarantine.max_pendng", "unknown key"},
		{"quarantine: {source_share: 0}", "quarantine.source_share", "in (0, 1]"},
		{"quarantine: {tenant_share: 1.5}", "quarantine.tenant_share", "in (0, 1]"},
		{"quarantine: {retention_seconds: 0}", "quarantine.retention_seconds", "must be > 0, got 0"},
		{"quarantine: {write_timeout_ms: -1}", "quarantine.write_timeout_ms", "must be > 0, got -1"},
		{"dedupe: {max_entries_per_source: 0}", "dedupe.max_entries_per_source", "must be > 0, got 0"},
		// dedupe (top level)
		{"dedupe: {max_entries: 0}", "dedupe.max_entries", "must be > 0, got 0"},
		{"dedupe: {max_entries_per_tenant: 0}", "dedupe.max_entries_per_tenant", "must be > 0, got 0"},
		{"dedupe: {max_entries: 10, max_entries_per_tenant: 11}", "dedupe.max_entries_per_tenant", "<= dedupe.max_entries"},
		{"dedupe: {scope: fleet}", "fleet.store.addr", "required when"},
		{"dedupe: {scope: fleet}\nfleet: {store: {addr: nohost}}", "fleet.store.addr", "host:port"},
		{"dedupe: {scope: fleet}\nfleet: {store: {addr: \"127.0.0.1:6379\"}, timeout_ms: 0}", "fleet.timeout_ms", "> 0"},
	}
	shared := make([]sharedCase, len(cases))
	for i, tc := range cases {
		shared[i] = sharedCase{Name: tc.path + ": " + tc.msg, YAML: tc.yml}
	}
	shareCases(t, "trust_refusals", shared)
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yml), envOf(nil))
		if err == nil {
			t.Errorf("%s\naccepted, want %s: %s", tc.yml, tc.path, tc.msg)
			continue
		}
		ps := problemsOf(t, err)
		found := false
		for _, p := range ps {
			found = found || (p.Path == tc.path && strings.Contains(p.Msg, tc.msg))
		}
		if !found {
			t.Errorf("%s\nproblems %v, want %s: …%s…", tc.yml, ps, tc.path, tc.msg)
		}
	}
}

// Inventory B.3: on_verify_failure "reject", store_headers "drop credentials", dedupe "none",
// trust_url_tenant false, rate_limits.default null (unlimited), quarantine 100 / 20 per s / 1 GiB,
// "at most 1 000 writes waiting" (seed, Quarantine row).
func TestTrustDefaults(t *testing.T) {
	c := mustParse(t, src("tenant: acme"), nil)
	s := c.Sources["gh"]
	if s.OnVerifyFailure != OnVerifyReject || s.StoreHeaders.Mode != StoreHeadersDrop || len(s.StoreHeaders.Extra) != 0 ||
		s.Dedupe != nil || s.TrustURLTenant || s.Verify.Type != "" {
		t.Fatalf("source trust defaults %+v", s)
	}
	r := c.RateLimits
	if r.Default != nil || r.IP != nil || r.Node != nil || r.SourceBytes != nil || len(r.Tenants) != 0 {
		t.Fatalf("rate limits must default to unlimited: %+v", r)
	}
	if _, ok := r.HookLimit("acme"); ok {
		t.Fatal("a tenant is limited with no rate_limits section")
	}
	if q := c.Quarantine; q != (Quarantine{Burst: 100, Rate: 20, MaxBytes: 1 << 30, MaxPending: 1000,
		SourceShare: 0.1, TenantShare: 0.5, RetentionSeconds: 604_800, WriteTimeoutMS: 5000}) {
		t.Fatalf("quarantine defaults %+v", q)
	}
	if d := c.Dedupe; d != (Dedupe{MaxEntries: 10_000_000, MaxEntriesPerTenant: 1_000_000, MaxEntriesPerSource: 500_000, Scope: ScopeNode}) {
		t.Fatalf("dedupe defaults %+v", d)
	}
	// A Source built in code (no applyDefaults) with empty policy strings is valid: empty means default.
	d := Default()
	d.Sources["x"] = Source{Tenant: "default", Sinks: []SinkSpec{{Type: "log"}}}
	if err := d.Validate(); err != nil {
		t.Fatalf("code-built source: %v", err)
	}
	// Explicit values are kept next to unwritten defaults.
	c = mustParse(t, "quarantine: {rate: 0.5}\ndedupe: {max_entries: 50_000_000}\n"+src("on_verify_failure: accept_flag\nstore_headers: {mode: hash}\ntrust_url_tenant: true"), nil)
	if c.Quarantine.Rate != 0.5 || c.Quarantine.Burst != 100 || c.Dedupe.MaxEntries != 50_000_000 || c.Dedupe.MaxEntriesPerTenant != 1_000_000 {
		t.Fatalf("partial sections %+v %+v", c.Quarantine, c.Dedupe)
	}
	s = c.Sources["gh"]
	if s.OnVerifyFailure != OnVerifyAcceptFlag || s.StoreHeaders.Mode != StoreHeadersHash || !s.TrustURLTenant {
		t.Fatalf("explicit source keys %+v", s)
	}
}

// Inventory C.6: "secret: [new, old] (≤ 8 entries), every key tried"; B.3 verify.secret "string or list".
// Both shapes load through verify.Secrets' own decoder, interpolated, and never reach a problem or print.
func TestVerifySecretLoadsAsScalarOrList(t *testing.T) {
	const secret = "hunter2-s3cr3t"
	env := map[string]string{"S": secret, "OLD": "old-0ld"}
	c := mustParse(t, src("verify: {type: github, secret: '${S}'}"), env)
	if got := c.Sources["gh"].Verify.Secret; !slices.Equal(got, verify.Secrets{secret}) {
		t.Fatalf("scalar secret %d entries", len(got))
	}
	c = mustParse(t, src("verify: {type: stripe, secret: ['${S}', '${OLD}'], tolerance_seconds: 60}"), env)
	if v := c.Sources["gh"].Verify; !slices.Equal(v.Secret, verify.Secrets{secret, "old-0ld"}) || v.ToleranceSeconds != 60 {
		t.Fatalf("list secret: %d entries", len(v.Secret))
	}
	// A secret that looks like a number keeps its digits; an anchor works like any other value.
	c = mustParse(t, src("verify: {type: github, secret: &k [0123, abc]}")+"  gl:\n    sinks: [{type: log}]\n    verify: {type: github, secret: *k}\n", env)
	if got := c.Sources["gl"].Verify.Secret; !slices.Equal(got, verify.Secrets{"0123", "abc"}) {
		t.Fatalf("aliased list %d entries", len(got))
	}

	out, err := json.Marshal(mustParse(t, src("verify: {type: token, location: basic, username: u53r, secret: '${S}'}"), env).Redacted())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), secret) || strings.Contains(string(out), "u53r") || !strings.Contains(string(out), `"verify":{"location":"basic","secret":"[REDACTED]","type":"token","username":"[REDACTED]"}`) {
		t.Fatalf("Redacted() verify block: %s", out)
	}

	for _, yml := range []string{
		src("verify: {type: github, secret: ['${S}', {k: '${S}'}]}"),
		src("verify: {type: gihub, secret: '${S}'}"),
		src("verify: {type: hmac, secret: '${S}', hash: sha3}"),
		src("verify: {type: standard_webhooks, secret: '${S}'}"), // not whsec_ base64
		src("verify: {secret: '${S}'}"),
	} {
		_, err := Parse([]byte(yml), envOf(env))
		problemsOf(t, err)
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s\nechoes the secret: %v", yml, err)
		}
	}
}

// Inventory B.3: dedupe is "preset name, or {preset|header|json, ttl_seconds (259 200)}".
func TestDedupeLoadsAsPresetNameOrMapping(t *testing.T) {
	c := mustParse(t, src("dedupe: github"), nil)
	if d := c.Sources["gh"].Dedupe; d == nil || *d != (DedupeSpec{Preset: "github", TTLSeconds: 259_200}) {
		t.Fatalf("string shape %+v", d)
	}
	c = mustParse(t, src("dedupe: {json: data.object.id, ttl_seconds: 60}"), nil)
	if d := c.Sources["gh"].Dedupe; d == nil || *d != (DedupeSpec{JSON: "data.object.id", TTLSeconds: 60}) {
		t.Fatalf("json shape %+v", d)
	}
	c = mustParse(t, src("dedupe: {header: X-Event-Id}"), nil)
	if d := c.Sources["gh"].Dedupe; d == nil || *d != (DedupeSpec{Header: "X-Event-Id", TTLSeconds: 259_200}) {
		t.Fatalf("header shape %+v", d)
	}
	c = mustParse(t, src("dedupe: &d {preset: svix}")+"  gl:\n    sinks: [{type: log}]\n    dedupe: {<<: *d, ttl_seconds: 5}\n", nil)
	if d := c.Sources["gl"].Dedupe; d == nil || *d != (DedupeSpec{Preset: "svix", TTLSeconds: 5}) {
		t.Fatalf("merged shape %+v", d)
	}
	if d := mustParse(t, src("dedupe: ~"), nil).Sources["gh"].Dedupe; d != nil {
		t.Fatalf("null dedupe = %+v, want none", d)
	}

	// Outside a file (a source posted to the admin API) the same decoder applies, with relative paths.
	var d DedupeSpec
	if err := yaml.Unmarshal([]byte("stripe"), &d); err != nil || d != (DedupeSpec{Preset: "stripe", TTLSeconds: 259_200}) {
		t.Fatalf("yaml.Unmarshal string: %+v, %v", d, err)
	}
	if err := yaml.Unmarshal([]byte("{header: x-id, ttl_seconds: 7}"), &d); err != nil || d != (DedupeSpec{Header: "x-id", TTLSeconds: 7}) {
		t.Fatalf("yaml.Unmarshal mapping: %+v, %v", d, err)
	}
	err := yaml.Unmarshal([]byte("{header: x-id, ttl: 7}"), &d)
	if err == nil || !strings.Contains(err.Error(), "ttl: unknown key") {
		t.Fatalf("yaml.Unmarshal unknown key: %v", err)
	}
}

// Inventory B.3: rate_limits.default "{rate: hooks/s (fractions ok), burst}"; tenants "precedence:
// runtime override > tenant entry > default" (the runtime override is the admin API's).
func TestRateLimitsPrecedenceAndFractions(t *testing.T) {
	c := mustParse(t, `
rate_limits:
  default: {rate: 0.5, burst: 2}
  ip: {rate: 100, burst: 200}
  node: {rate: 5000, burst: 10000}
  source_bytes: {rate: 1e6, burst: 8e6}
  tenants:
    acme: {rate: 50, burst: 100, bytes_rate: 1e6, bytes_burst: 2e6, max_body_bytes: 2000000, max_queue: 100, max_queue_bytes: 1048576}
    globex: {max_queue: 10}
`, nil)
	r := &c.RateLimits
	if *r.Default != (Rate{0.5, 2}) || *r.IP != (Rate{100, 200}) || *r.Node != (Rate{5000, 10000}) || *r.SourceBytes != (Rate{1e6, 8e6}) {
		t.Fatalf("rate limits %+v", r)
	}
	if l, ok := r.HookLimit("acme"); !ok || l != (Rate{50, 100}) {
		t.Fatalf("acme hook limit %+v %v", l, ok)
	}
	if l, ok := r.HookLimit("globex"); !ok || l != (Rate{0.5, 2}) {
		t.Fatalf("an entry without rate must fall back to the default: %+v %v", l, ok)
	}
	if l, ok := r.HookLimit("other"); !ok || l != (Rate{0.5, 2}) {
		t.Fatalf("default hook limit %+v %v", l, ok)
	}
	if l, ok := r.ByteLimit("acme"); !ok || l != (Rate{1e6, 2e6}) {
		t.Fatalf("acme byte limit %+v %v", l, ok)
	}
	if _, ok := r.ByteLimit("globex"); ok {
		t.Fatal("a tenant without bytes_rate has a byte limit")
	}
	if a := r.Tenants["acme"]; a.MaxBodyBytes != 2_000_000 || a.MaxQueue != 100 || a.MaxQueueBytes != 1<<20 {
		t.Fatalf("acme entry %+v", a)
	}
}

// Inventory A.2 [R]: "With tenant_path, a shared default source whose verify type is none must set
// trust_url_tenant: true; boot warns about every shared unverified source". Boot refuses one that does not
// set it (exit 78, with its key path) and warns about those that do.
func TestSharedUnverifiedSourceUnderTenantPathMustTrustTheURL(t *testing.T) {
	yml := "http: {routing: tenant_path}\nsources:\n  open: {sinks: [{type: log}]}\n  trusted: {sinks: [{type: log}], trust_url_tenant: true}\n" +
		"  signed: {sinks: [{type: log}], verify: {type: github, secret: s}}\n  owned: {tenant: acme, sinks: [{type: log}]}\n"
	_, err := Parse([]byte(yml), envOf(nil))
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].Path != "sources.open.trust_url_tenant" || !strings.Contains(ps[0].Msg, "must be true") {
		t.Fatalf("problems %v, want one at sources.open.trust_url_tenant", ps)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v is not ErrInvalid (exit 78)", err)
	}
	w := mustParse(t, strings.Replace(yml, "  open: {sinks: [{type: log}]}\n", "", 1), nil).TrustWarnings()
	if len(w) != 1 || !strings.HasPrefix(w[0], "sources.trusted:") {
		t.Fatalf("warnings %v, want one for sources.trusted", w)
	}
	if w := mustParse(t, strings.Replace(yml, "tenant_path", "path", 1), nil).TrustWarnings(); len(w) != 0 {
		t.Fatalf("warnings under path routing: %v", w)
	}
}

// A client_cert source can only verify if the ingest listener asks clients for a certificate: boot says
// so when it does not.
func TestClientCertSourceWithoutClientAuthIsWarned(t *testing.T) {
	yml := "sources:\n  mtls: {sinks: [{type: log}], verify: {type: client_cert, pins: ['sha256:" + strings.Repeat("ab", 32) + "']}}\n"
	w := mustParse(t, yml, nil).TrustWarnings()
	if len(w) != 1 || !strings.HasPrefix(w[0], "sources.mtls.verify: type client_cert") || !strings.Contains(w[0], "http.tls.client_auth") {
		t.Fatalf("warnings %v, want one for sources.mtls.verify naming http.tls.client_auth", w)
	}
	dir := t.TempDir()
	withTLS := "http: {tls: {cert_file: " + dir + "/c.pem, key_file: " + dir + "/k.pem, client_auth: %s}}\n" + yml
	if w := mustParse(t, fmt.Sprintf(withTLS, "none"), nil).TrustWarnings(); len(w) != 1 {
		t.Fatalf("client_auth none: warnings %v, want one", w)
	}
	if w := mustParse(t, fmt.Sprintf(withTLS, "request"), nil).TrustWarnings(); len(w) != 0 {
		t.Fatalf("client_auth request: warnings %v, want none", w)
	}
}
