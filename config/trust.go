package config

import (
	"math"
	"net"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The trust keys: what a source does with a request that fails verification, how it recognises a provider's
// retry (dedupe), which headers it keeps (store_headers), and the limits that keep one sender from spending
// another's capacity (rate_limits, quarantine, dedupe).

// Policies of sources.<id>.on_verify_failure (inventory C.4).
const (
	OnVerifyReject     = "reject"      // 401 verification_failed, nothing stored (the default)
	OnVerifyQuarantine = "quarantine"  // 202, held in the quarantine pen until a replay job re-verifies it
	OnVerifyAcceptFlag = "accept_flag" // 201, committed flagged, with no dedupe key
)

// Modes of sources.<id>.store_headers.mode.
const (
	StoreHeadersDrop = "drop" // credential headers are not stored (the default)
	StoreHeadersHash = "hash" // credential headers are stored as "sha256:<hex of the value>"
)

// DefaultDedupeTTLSeconds is the dedupe window when a dedupe block sets no ttl_seconds: 72 h (inventory C.5).
const DefaultDedupeTTLSeconds = 259_200

// A source's verification budget when it sets no verify_failure_bytes: 64 MiB/s of hashing by failed
// verifications, in a bucket of 256 MiB. One worst-case forged request (an 8 MB body against 8 keys)
// hashes about 64 MB, so one source's forgeries keep well under one core busy, while a sender whose
// signatures fail on ordinary bodies (a few KB) still gets thousands of failures a second.
const (
	DefaultVerifyFailureRate  = 64 << 20  // bytes hashed per second
	DefaultVerifyFailureBurst = 256 << 20 // bytes
)

var (
	verifyFailurePolicies = []string{OnVerifyReject, OnVerifyQuarantine, OnVerifyAcceptFlag}
	storeHeaderModes      = []string{StoreHeadersDrop, StoreHeadersHash}
	// dedupePresets are the providers whose event key the edge knows (inventory C.5).
	dedupePresets = []string{"github", "standard_webhooks", "svix", "shopify", "stripe", "twilio", "paddle", "linear",
		"intercom", "typeform", "pagerduty", "square", "mailgun", "gitlab"}
)

// DedupeSpec is sources.<id>.dedupe: a preset name (`dedupe: github`) or a mapping
// `{preset | header | json, ttl_seconds}` naming exactly one place the provider's event key is read from.
type DedupeSpec struct {
	Preset     string `yaml:"preset"`      // one of dedupePresets (docs/providers.md)
	Header     string `yaml:"header"`      // a request header holding the key (matched case-insensitively)
	JSON       string `yaml:"json"`        // a dotted path of object keys into a JSON body ("data.id")
	TTLSeconds int    `yaml:"ttl_seconds"` // default 259_200 (72 h); > 0
}

// decodeNode reads both shapes. A written block starts from the default TTL, so `dedupe: github` and a
// mapping without ttl_seconds both get 72 h.
func (d *DedupeSpec) decodeNode(w *walker, n *yaml.Node, path string, depth int) {
	*d = DedupeSpec{TTLSeconds: DefaultDedupeTTLSeconds}
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		d.Preset = n.Value
	case n.Kind == yaml.MappingNode:
		w.decodeStruct(n, reflect.ValueOf(d).Elem(), path, true, depth)
	default:
		w.typeErr(path, "a preset name or a mapping", n, true)
	}
}

// UnmarshalYAML decodes a dedupe block outside a configuration file (a source posted to the admin API)
// with the same strict rules as the file: it returns an *Error whose paths are relative to the block.
func (d *DedupeSpec) UnmarshalYAML(n *yaml.Node) error {
	var ps problems
	newWalker(&ps).decode(n, reflect.ValueOf(d).Elem(), "", true, 0)
	return ps.asError()
}

// StoreHeaders is sources.<id>.store_headers: what happens to credential headers before a hook is stored.
// The credential headers are authorization, proxy-authorization, cookie, set-cookie, x-api-key and
// x-auth-token, plus Extra; a token verifier's header is dropped whatever the mode.
type StoreHeaders struct {
	Mode  string   `yaml:"mode"`  // drop (default) | hash
	Extra []string `yaml:"extra"` // more header names treated as credentials (any case); default none
}

// Rate is a token bucket: Rate units per second (fractions allowed) refilling a bucket of Burst units.
// Both are required when the block is written.
type Rate struct {
	Rate  float64 `yaml:"rate"`  // > 0
	Burst float64 `yaml:"burst"` // >= 1
}

// RateLimits is the rate_limits section. The original publishes only rate_limits.default and
// rate_limits.tenants.<t>.{rate, burst}; it does not publish the key names of the byte, per-client-address,
// per-node and per-source limits nor of the tenant's body cap and batcher share, so bytes_rate, bytes_burst,
// max_body_bytes, max_queue, max_queue_bytes, ip, node and source_bytes are this implementation's names.
type RateLimits struct {
	// Default is every tenant's ingest limit in hooks/s, charged after verification (429 rate_limited);
	// default null = unlimited.
	Default *Rate `yaml:"default"`
	// Tenants are per-tenant entries; a tenant without one gets Default. Default {}.
	Tenants map[string]TenantLimits `yaml:"tenants"`
	// IP limits requests per client address (an IPv6 client per /64) before the body is read
	// (429 ip_rate_limited); default null.
	IP *Rate `yaml:"ip"`
	// Node limits requests on this node before the body is read (429 node_rate_limited); default null.
	Node *Rate `yaml:"node"`
	// SourceBytes limits body bytes/s per source before the body is read, charged by Content-Length, or for
	// a chunked body by the bytes read, right after the read (429 source_rate_limited); default null. Its
	// burst must hold one http.max_body_bytes body.
	SourceBytes *Rate `yaml:"source_bytes"`
	// Scope is where the tenant quota (default and tenants) is counted: node (default, this node alone) or
	// fleet (in fleet.store, one bucket for every node; the pre-read ip, node and source_bytes limits stay
	// per node).
	Scope string `yaml:"scope"`
}

// Scopes of rate_limits.scope and dedupe.scope.
const (
	ScopeNode  = "node"
	ScopeFleet = "fleet"
)

// Fleet is the fleet section: the Redis that fleet-scoped rate limits and dedupe count in. Each hook costs it
// one call bounded by timeout_ms; a breaker takes a slow or dead store out of the path (the node then limits
// and dedupes alone, ankusa_fleet_limiter_degraded 1), never a 503.
type Fleet struct {
	Store FleetStore `yaml:"store"`
	// TimeoutMS is the hard budget of one call, dial included (default 50; > 0).
	TimeoutMS int `yaml:"timeout_ms"`
	// BreakerFailures consecutive failed calls open the breaker (default 3; > 0); it stays open
	// breaker_open_ms (default 5000; > 0), then one call probes the store.
	BreakerFailures int `yaml:"breaker_failures"`
	BreakerOpenMS   int `yaml:"breaker_open_ms"`
}

// FleetStore is fleet.store: the Redis every node of the fleet shares.
type FleetStore struct {
	Addr     string `yaml:"addr"`                     // host:port; required when a scope is fleet
	DB       int    `yaml:"db"`                       // default 0
	Password string `yaml:"password" config:"secret"` // default none
	// KeyPrefix starts every key the node writes (default "ankusa:fleet:"); nodes of one fleet share it.
	KeyPrefix string `yaml:"key_prefix"`
}

// FleetEnabled reports whether anything is counted in fleet.store.
func (c *Config) FleetEnabled() bool {
	return c.RateLimits.Scope == ScopeFleet || c.Dedupe.Scope == ScopeFleet
}

// TenantLimits is rate_limits.tenants.<t>. Every field is optional; 0 means "not set".
type TenantLimits struct {
	Rate  float64 `yaml:"rate"`  // hooks/s; with burst, replaces rate_limits.default for this tenant
	Burst float64 `yaml:"burst"` // hooks
	// BytesRate and BytesBurst limit the tenant's body bytes/s, charged after verification (429 rate_limited).
	BytesRate  float64 `yaml:"bytes_rate"`
	BytesBurst float64 `yaml:"bytes_burst"` // >= the tenant's effective max body bytes
	// MaxBodyBytes caps the tenant's bodies below http.max_body_bytes (413); 0 = http.max_body_bytes.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxQueue and MaxQueueBytes are the tenant's share of the batchers: records and body bytes of this
	// tenant buffered or in flight on the node; past it 429 tenant_overload. 0 = no share.
	MaxQueue      int   `yaml:"max_queue"`
	MaxQueueBytes int64 `yaml:"max_queue_bytes"`
}

// HookLimit returns tenant t's hooks/s limit: its entry's rate when set, else rate_limits.default.
// ok is false when the tenant is unlimited.
func (r *RateLimits) HookLimit(tenant string) (lim Rate, ok bool) {
	if t, found := r.Tenants[tenant]; found && t.Rate > 0 {
		return Rate{Rate: t.Rate, Burst: t.Burst}, true
	}
	if r.Default != nil {
		return *r.Default, true
	}
	return Rate{}, false
}

// ByteLimit returns tenant t's body bytes/s limit; ok is false when it has none.
func (r *RateLimits) ByteLimit(tenant string) (lim Rate, ok bool) {
	if t, found := r.Tenants[tenant]; found && t.BytesRate > 0 {
		return Rate{Rate: t.BytesRate, Burst: t.BytesBurst}, true
	}
	return Rate{}, false
}

// Quarantine is the quarantine section: the pen that holds hooks failing verification on a source whose
// on_verify_failure is quarantine (and the bucket accept_flag hooks spend).
type Quarantine struct {
	Burst    float64 `yaml:"burst"`     // default 100 hooks per source bucket; >= 1
	Rate     float64 `yaml:"rate"`      // default 20 hooks/s per source; > 0 (past it 429 quarantine_rate_limited)
	MaxBytes int64   `yaml:"max_bytes"` // default 1 GiB of entries (body, headers, request line); > 0 (past it 503 quarantine_full)
	// MaxPending bounds the writes waiting for the pen's disk write (503 overload past it). The original
	// fixes it at 1 000 without a key; max_pending is this implementation's name.
	MaxPending int `yaml:"max_pending"`
	// SourceShare and TenantShare are the fractions of max_bytes one source, and all the sources of one
	// tenant, may hold (503 quarantine_full past either), so one sender cannot fill the node's pen. Defaults
	// 0.1 and 0.5; each in (0, 1]. Keys of this implementation: the original has one node-wide cap.
	SourceShare float64 `yaml:"source_share"`
	TenantShare float64 `yaml:"tenant_share"`
	// RetentionSeconds is how long an entry stays in the pen unreleased before the sweeper deletes it
	// (default 604 800, 7 days; > 0). The design names no retention; without one the pen only fills.
	RetentionSeconds int64 `yaml:"retention_seconds"`
	// WriteTimeoutMS bounds how long a request waits for its pen write to start (default 5000, the original's
	// fixed 5 s; > 0); past it the write is withdrawn and the answer is 503 store_unavailable. A write that
	// started is waited out: it may land, so it is never answered 503.
	WriteTimeoutMS int `yaml:"write_timeout_ms"`
}

// Dedupe is the dedupe section: bounds of the dedupe index. The original does not publish defaults; these
// allow a busy node three days of keys at ~40 hooks/s per tenant, and a key costs ~150 bytes on disk.
type Dedupe struct {
	MaxEntries          int64 `yaml:"max_entries"`            // default 10_000_000 live keys on the node; > 0
	MaxEntriesPerTenant int64 `yaml:"max_entries_per_tenant"` // default 1_000_000; 1..max_entries
	// MaxEntriesPerSource bounds one source's live keys over every tenant (default 500_000, half a tenant's
	// default share; > 0), so one source cannot take its tenant's or, shared under tenant_path, the node's share.
	MaxEntriesPerSource int64 `yaml:"max_entries_per_source"`
	// Scope is where provider event keys are claimed: node (default, this node's index) or fleet (a two-phase
	// claim in fleet.store before the commit, so every node of the fleet shares one dedupe window).
	Scope string `yaml:"scope"`
}

// validateTrust checks the top-level trust sections.
func (c *Config) validateTrust(ps *problems) {
	c.validateURLRouting(ps)
	r := c.RateLimits
	if r.Default != nil {
		checkRate(ps, "rate_limits.default", *r.Default)
	}
	if r.IP != nil {
		checkRate(ps, "rate_limits.ip", *r.IP)
	}
	if r.Node != nil {
		checkRate(ps, "rate_limits.node", *r.Node)
	}
	if r.SourceBytes != nil {
		checkRate(ps, "rate_limits.source_bytes", *r.SourceBytes)
		if b := r.SourceBytes.Burst; b >= 1 && b < float64(c.HTTP.MaxBodyBytes) {
			ps.mustBe("rate_limits.source_bytes.burst", ">= http.max_body_bytes (a largest body must fit the bucket)", b)
		}
	}
	for t, l := range r.Tenants {
		p := join("rate_limits.tenants", t)
		if !validID(t) {
			ps.add(p, "tenant id must match [A-Za-z0-9_-]{1,64}")
		}
		checkOptionalRate(ps, p, "rate", "burst", l.Rate, l.Burst)
		checkOptionalRate(ps, p, "bytes_rate", "bytes_burst", l.BytesRate, l.BytesBurst)
		nonNegative(ps, join(p, "max_body_bytes"), l.MaxBodyBytes)
		if l.MaxBodyBytes > c.HTTP.MaxBodyBytes {
			ps.mustBe(join(p, "max_body_bytes"), "<= http.max_body_bytes", l.MaxBodyBytes)
		}
		maxBody := c.HTTP.MaxBodyBytes
		if l.MaxBodyBytes > 0 {
			maxBody = l.MaxBodyBytes
		}
		if l.BytesRate > 0 && l.BytesBurst >= 1 && l.BytesBurst < float64(maxBody) {
			ps.mustBe(join(p, "bytes_burst"), ">= the tenant's max body bytes (a largest body must fit the bucket)", l.BytesBurst)
		}
		nonNegative(ps, join(p, "max_queue"), l.MaxQueue)
		nonNegative(ps, join(p, "max_queue_bytes"), l.MaxQueueBytes)
	}

	c.validateFleet(ps)

	q := c.Quarantine
	if !(q.Burst >= 1) || math.IsInf(q.Burst, 0) {
		ps.mustBe("quarantine.burst", ">= 1", q.Burst)
	}
	if !(q.Rate > 0) || math.IsInf(q.Rate, 0) {
		ps.mustBe("quarantine.rate", "> 0", q.Rate)
	}
	positive(ps, "quarantine.max_bytes", q.MaxBytes)
	positive(ps, "quarantine.max_pending", q.MaxPending)
	for _, f := range [...]struct {
		key string
		v   float64
	}{{"quarantine.source_share", q.SourceShare}, {"quarantine.tenant_share", q.TenantShare}} {
		if !(f.v > 0 && f.v <= 1) {
			ps.mustBe(f.key, "a fraction of quarantine.max_bytes in (0, 1]", f.v)
		}
	}
	positive(ps, "quarantine.retention_seconds", q.RetentionSeconds)
	positive(ps, "quarantine.write_timeout_ms", q.WriteTimeoutMS)

	d := c.Dedupe
	positive(ps, "dedupe.max_entries", d.MaxEntries)
	positive(ps, "dedupe.max_entries_per_tenant", d.MaxEntriesPerTenant)
	positive(ps, "dedupe.max_entries_per_source", d.MaxEntriesPerSource)
	if d.MaxEntriesPerTenant > d.MaxEntries && d.MaxEntries > 0 {
		ps.mustBe("dedupe.max_entries_per_tenant", "<= dedupe.max_entries", d.MaxEntriesPerTenant)
	}
}

// validateURLRouting refuses, under http.routing tenant_path, a shared source that verifies nothing and
// has not set trust_url_tenant (inventory A.2 [R]: such a source "must set trust_url_tenant: true"): its
// hooks would land in whichever tenant a caller writes in the URL.
func (c *Config) validateURLRouting(ps *problems) {
	if c.HTTP.MaxURLTenants <= 0 {
		ps.mustBe("http.max_url_tenants", "> 0", c.HTTP.MaxURLTenants)
	}
	if c.HTTP.Routing != "tenant_path" {
		return
	}
	for _, id := range sortedKeys(c.Sources) {
		s := c.Sources[id]
		if s.Tenant == defaultTenant && (s.Verify.Type == "" || s.Verify.Type == "none") && !s.TrustURLTenant {
			ps.add(join(join("sources", id), "trust_url_tenant"), "must be true for a shared (tenant default) source with no verifier under http.routing tenant_path: its hooks land in whichever tenant the URL names; set it to accept that, give the source a verifier, or give it a tenant")
		}
	}
}

// checkRate checks a written {rate, burst} block: both required, finite, rate > 0, burst >= 1.
func checkRate(ps *problems, p string, r Rate) {
	checkPair(ps, join(p, "rate"), join(p, "burst"), r.Rate, r.Burst, "required when "+p+" is set")
}

// checkOptionalRate checks a pair of a tenant entry: both unset, or both set and in range.
func checkOptionalRate(ps *problems, p, rateKey, burstKey string, rate, burst float64) {
	if rate == 0 && burst == 0 {
		return
	}
	checkPair(ps, join(p, rateKey), join(p, burstKey), rate, burst, "required with "+rateKey+" and "+burstKey)
}

func checkPair(ps *problems, ratePath, burstPath string, rate, burst float64, missing string) {
	switch {
	case rate == 0:
		ps.add(ratePath, "%s", missing)
	case !(rate > 0) || math.IsInf(rate, 0):
		ps.mustBe(ratePath, "a finite number > 0", rate)
	}
	switch {
	case burst == 0:
		ps.add(burstPath, "%s", missing)
	case !(burst >= 1) || math.IsInf(burst, 0):
		ps.mustBe(burstPath, "a finite number >= 1", burst)
	}
}

// validateSourceTrust checks a source's verify, on_verify_failure, dedupe and store_headers keys. An empty
// on_verify_failure or store_headers.mode (a Source built in code) means the default.
func validateSourceTrust(ps *problems, p string, s Source) {
	vp := join(p, "verify")
	for _, pr := range s.Verify.Validate() {
		// verify's messages never hold a secret's value.
		ps.add(subPath(vp, pr.Field), "%s", pr.Msg)
	}
	if s.OnVerifyFailure != "" && !slices.Contains(verifyFailurePolicies, s.OnVerifyFailure) {
		ps.oneOf(join(p, "on_verify_failure"), verifyFailurePolicies, s.OnVerifyFailure)
	}
	if s.Dedupe != nil {
		validateDedupe(ps, join(p, "dedupe"), *s.Dedupe)
	}
	if s.VerifyFailureBytes != nil {
		checkRate(ps, join(p, "verify_failure_bytes"), *s.VerifyFailureBytes)
	}
	validateURLTenants(ps, p, s)
	validateHandshake(ps, p, s)
	hp := join(p, "store_headers")
	if m := s.StoreHeaders.Mode; m != "" && !slices.Contains(storeHeaderModes, m) {
		ps.oneOf(join(hp, "mode"), storeHeaderModes, m)
	}
	for i, h := range s.StoreHeaders.Extra {
		if !validHeaderName(h) {
			ps.mustBe(index(join(hp, "extra"), i), "a header name (RFC 9110 token characters)", quote(h))
		}
	}
}

// validateURLTenants checks the keys that bound which tenants a URL may name for a shared source.
func validateURLTenants(ps *problems, p string, s Source) {
	shared := s.Tenant == defaultTenant || s.Tenant == ""
	if len(s.URLTenants) > 0 && len(s.TenantSecrets) > 0 {
		ps.add(join(p, "url_tenants"), "set url_tenants or tenant_secrets, not both (tenant_secrets' tenants are the allow-list)")
	}
	for i, t := range s.URLTenants {
		if !validID(t) {
			ps.mustBe(index(join(p, "url_tenants"), i), "a tenant id ([A-Za-z0-9_-]{1,64})", quote(t))
		}
	}
	if len(s.URLTenants) > 0 && !shared {
		ps.add(join(p, "url_tenants"), "only for a shared source (tenant default)")
	}
	if len(s.TenantSecrets) == 0 {
		return
	}
	tp := join(p, "tenant_secrets")
	keyField := "secret"
	switch s.Verify.Type {
	case "", "none", "token", "client_cert":
		ps.add(tp, "only for a source that verifies a signature (verify.type %s has no secret to replace)", orNone(s.Verify.Type))
		return
	case "ed25519":
		keyField = "public_key"
	}
	if !shared {
		ps.add(tp, "only for a shared source (tenant default)")
	}
	for _, t := range sortedKeys(s.TenantSecrets) {
		if !validID(t) {
			ps.add(join(tp, t), "tenant id must match [A-Za-z0-9_-]{1,64}")
			continue
		}
		spec := s.Verify.ForKeys(s.TenantSecrets[t])
		for _, pr := range spec.Validate() {
			// Only the key problems are the tenant's; the rest are the verify block's, reported there.
			if rel, ok := strings.CutPrefix(pr.Field, keyField); ok {
				ps.add(join(tp, t)+rel, "%s", pr.Msg)
			}
		}
	}
}

func orNone(typ string) string {
	if typ == "" {
		return "none"
	}
	return typ
}

func validateDedupe(ps *problems, p string, d DedupeSpec) {
	set := 0
	for _, v := range []string{d.Preset, d.Header, d.JSON} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		ps.add(p, "must name exactly one of preset, header or json")
	}
	if d.Preset != "" && !slices.Contains(dedupePresets, d.Preset) {
		ps.oneOf(join(p, "preset"), dedupePresets, d.Preset)
	}
	if d.Header != "" && !validHeaderName(d.Header) {
		ps.mustBe(join(p, "header"), "a header name (RFC 9110 token characters)", quote(d.Header))
	}
	if d.JSON != "" && slices.Contains(strings.Split(d.JSON, "."), "") {
		ps.mustBe(join(p, "json"), `dot-separated non-empty object keys ("data.id")`, quote(d.JSON))
	}
	positive(ps, join(p, "ttl_seconds"), d.TTLSeconds)
}

// validHeaderName reports whether s is an HTTP field name: one or more RFC 9110 token characters.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// subPath appends a relative key path ("secret[1]", "ttl_seconds", "") to path.
func subPath(path, rel string) string {
	switch {
	case rel == "":
		return path
	case strings.HasPrefix(rel, "["):
		return path + rel
	}
	return join(path, rel)
}

// TrustWarnings lists, as boot warnings, the sources whose verification cannot work as configured (a
// client_cert source while the ingest listener asks no client for a certificate: http.tls off, or
// client_auth none) and, under http.routing tenant_path, every shared source with no verifier (it set
// trust_url_tenant, or boot would have refused it).
func (c *Config) TrustWarnings() []string {
	var w []string
	certs := c.HTTP.TLS.Enabled() && (c.HTTP.TLS.ClientAuth == "request" || c.HTTP.TLS.ClientAuth == "require")
	for _, id := range sortedKeys(c.Sources) {
		if c.Sources[id].Verify.Type == "client_cert" && !certs {
			w = append(w, "sources."+id+".verify: type client_cert, but the ingest listener asks no client for a certificate (http.tls.client_auth is none or TLS is off): every request of this source fails verification; set http.tls.client_auth to request or require")
		}
	}
	if c.HTTP.Routing != "tenant_path" {
		return w
	}
	for _, id := range sortedKeys(c.Sources) {
		s := c.Sources[id]
		if s.Tenant == defaultTenant && (s.Verify.Type == "" || s.Verify.Type == "none") && s.TrustURLTenant {
			// Inventory A.2 [R]: "boot warns about every shared unverified source"; one without
			// trust_url_tenant is refused by validateRouting instead.
			w = append(w, "sources."+id+": a shared (tenant default) source with no verifier under http.routing tenant_path writes into whichever tenant the URL names (trust_url_tenant: true)")
		}
	}
	return w
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// validateFleet checks the scopes and, when one is fleet, the fleet section.
func (c *Config) validateFleet(ps *problems) {
	scopes := []string{ScopeNode, ScopeFleet}
	if !slices.Contains(scopes, c.RateLimits.Scope) {
		ps.oneOf("rate_limits.scope", scopes, c.RateLimits.Scope)
	}
	if !slices.Contains(scopes, c.Dedupe.Scope) {
		ps.oneOf("dedupe.scope", scopes, c.Dedupe.Scope)
	}
	if !c.FleetEnabled() {
		return
	}
	f := c.Fleet
	if f.Store.Addr == "" {
		ps.add("fleet.store.addr", "required when rate_limits.scope or dedupe.scope is fleet")
	} else if _, _, err := net.SplitHostPort(f.Store.Addr); err != nil {
		ps.add("fleet.store.addr", "must be host:port")
	}
	nonNegative(ps, "fleet.store.db", f.Store.DB)
	positive(ps, "fleet.timeout_ms", f.TimeoutMS)
	positive(ps, "fleet.breaker_failures", f.BreakerFailures)
	positive(ps, "fleet.breaker_open_ms", f.BreakerOpenMS)
}

// validateHandshake checks handshake and handshake_token: a handshake that answers with the source's
// signing secret (slack, zoom, twitter) needs that provider's verify preset, meta needs its verify token.
func validateHandshake(ps *problems, p string, s Source) {
	hp := join(p, "handshake")
	kind := s.HandshakeKind()
	if !slices.Contains(Handshakes, kind) {
		ps.oneOf(hp, Handshakes, kind)
		return
	}
	switch kind {
	case "slack", "zoom", "twitter":
		if s.Verify.Type != kind {
			ps.add(hp, "%s needs verify.type %s: its answer is made with, or after a check of, that signature", kind, kind)
		}
	case "meta":
		if len(s.HandshakeToken) != 1 || s.HandshakeToken[0] == "" {
			ps.add(join(p, "handshake_token"), "required with handshake meta: the verify token set at Meta (one, non-empty)")
		}
	}
	if kind != "meta" && len(s.HandshakeToken) > 0 {
		ps.add(join(p, "handshake_token"), "only with handshake meta")
	}
}
