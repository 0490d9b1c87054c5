package config

import (
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

var (
	roleNames    = []string{RoleClaimCheck, RoleDispatch, RoleEdge, RoleStorage}
	walTypes     = []string{WALDisk, WALDual, WALNone}
	logLevels    = []string{"debug", "info", "warning", "error"}
	logFormats   = []string{"auto", "json", "console"}
	routingModes = []string{"path", "tenant_path"}
)

// Validate checks every value and cross-key rule and returns an *Error holding every problem, or nil.
// It does not modify c.
func (c *Config) Validate() error {
	var ps problems
	c.validate(&ps)
	return ps.asError()
}

func (c *Config) validate(ps *problems) {
	if !validID(c.Instance) {
		ps.add("instance", "must match [A-Za-z0-9_-]{1,64}, got %s", quote(c.Instance))
	}
	if c.Node.DataDir == "" {
		ps.add("node.data_dir", "must be non-empty")
	}
	c.validateRoles(ps)
	if !slices.Contains(logLevels, c.Log.Level) {
		ps.oneOf("log.level", logLevels, c.Log.Level)
	}
	if !slices.Contains(logFormats, c.Log.Format) {
		ps.oneOf("log.format", logFormats, c.Log.Format)
	}

	if c.HTTP.IP != "" && !validIP(c.HTTP.IP) {
		ps.mustBe("http.ip", `an IPv4 or IPv6 literal or "" (all interfaces)`, quote(c.HTTP.IP))
	}
	checkPort(ps, "http.port", c.HTTP.Port)
	if msg := prefixProblem(c.HTTP.Prefix); msg != "" {
		ps.mustBe("http.prefix", msg, quote(c.HTTP.Prefix))
	}
	if !slices.Contains(routingModes, c.HTTP.Routing) {
		ps.oneOf("http.routing", routingModes, c.HTTP.Routing)
	}
	positive(ps, "http.max_body_bytes", c.HTTP.MaxBodyBytes)
	positive(ps, "http.max_conns", c.HTTP.MaxConns)
	nonNegative(ps, "http.max_conns_per_ip", c.HTTP.MaxConnsPerIP)
	for _, f := range [...]struct {
		path string
		v    int64
	}{{"http.max_reading_bytes", c.HTTP.MaxReadingBytes}, {"http.max_reading_bytes_per_ip", c.HTTP.MaxReadingBytesPerIP}} {
		if f.v < c.HTTP.MaxBodyBytes {
			ps.mustBe(f.path, ">= http.max_body_bytes (a largest body must fit)", f.v)
		}
	}
	positive(ps, "http.header_timeout_ms", c.HTTP.HeaderTimeoutMS)
	positive(ps, "http.read_timeout_ms", c.HTTP.ReadTimeoutMS)
	positive(ps, "http.idle_timeout_ms", c.HTTP.IdleTimeoutMS)
	validateTLS(ps, "http.tls", c.HTTP.TLS)
	// The top-level alias is resolved by Parse; on a Config built in code only http.max_body_bytes counts.
	if c.MaxBodyBytes < 0 {
		ps.mustBe("max_body_bytes", "> 0", c.MaxBodyBytes)
	}

	if !validIP(c.Admin.IP) {
		ps.mustBe("admin.ip", "an IPv4 or IPv6 literal", quote(c.Admin.IP))
	}
	checkPort(ps, "admin.port", c.Admin.Port)
	if c.Admin.Enabled && c.Admin.Port != 0 && c.Admin.Port == c.HTTP.Port && addrsOverlap(c.HTTP.IP, c.Admin.IP) {
		ps.mustBe("admin.port", "different from http.port on an overlapping address", c.Admin.Port)
	}
	validateTLS(ps, "admin.tls", c.Admin.TLS)
	if t := c.Admin.TLS; t.ClientCAFile != "" {
		if _, err := LoadCertPool(t.ClientCAFile); err != nil {
			ps.add("admin.tls.client_ca_file", "must be a readable PEM file of CA certificates: %v", err)
		}
	}
	c.validatePrincipals(ps)
	c.validateRoutes(ps)
	positive(ps, "audit.retention_days", c.Audit.RetentionDays)
	validateSinkTypes(ps, "lifecycle.sinks", c.Lifecycle.Sinks)
	if len(c.Lifecycle.Sinks) > 0 && c.WAL.Type == WALNone {
		ps.add("lifecycle.sinks", "needs a store to keep the events until a sink confirms (wal.type disk or dual)")
	}
	switch ss := c.SourceStore; {
	case !slices.Contains([]string{SourceStoreStatic, SourceStorePersistent, SourceStoreRedis}, ss.Type):
		ps.oneOf("source_store.type", []string{SourceStoreStatic, SourceStorePersistent, SourceStoreRedis}, ss.Type)
	case ss.Type == SourceStoreRedis && ss.Redis.Addr == "":
		ps.add("source_store.redis.addr", "is required when source_store.type is redis")
	}

	if !slices.Contains(walTypes, c.WAL.Type) {
		ps.oneOf("wal.type", walTypes, c.WAL.Type)
	}
	positive(ps, "wal.publish_timeout_ms", c.WAL.PublishTimeoutMS)
	c.validateIntake(ps)

	b := c.Batcher
	if b.Partitions < 1 || b.Partitions > 64 {
		ps.mustBe("batcher.partitions", "1..64", b.Partitions)
	}
	positive(ps, "batcher.max_batch", b.MaxBatch)
	nonNegative(ps, "batcher.max_delay_ms", b.MaxDelayMS)
	positive(ps, "batcher.max_queue", b.MaxQueue)
	positive(ps, "batcher.max_queue_bytes", b.MaxQueueBytes)
	positive(ps, "batcher.max_commits", b.MaxCommits)
	positive(ps, "batcher.group_commit_max_bytes", b.GroupCommitMaxBytes)
	positive(ps, "batcher.group_commit_max_records", b.GroupCommitMaxRecords)
	positive(ps, "batcher.record_deadline_ms", b.RecordDeadlineMS)
	// A largest body must fit the queue that admits it, and a record's size is stored in 32 bits.
	if b.MaxQueueBytes > 0 && c.HTTP.MaxBodyBytes > b.MaxQueueBytes {
		ps.mustBe("http.max_body_bytes", "<= batcher.max_queue_bytes (a largest body must fit the queue)", c.HTTP.MaxBodyBytes)
	}
	if c.HTTP.MaxBodyBytes > math.MaxUint32 {
		ps.mustBe("http.max_body_bytes", "<= 4294967295 (a record's size is 32 bits)", c.HTTP.MaxBodyBytes)
	}

	nonNegative(ps, "listener.drain_delay_ms", c.Listener.DrainDelayMS)
	c.validateDispatch(ps)
	positive(ps, "listener.drain_timeout_ms", c.Listener.DrainTimeoutMS)

	positive(ps, "store.reopen_min_ms", c.Store.ReopenMinMS)
	if c.Store.ReopenMaxMS < c.Store.ReopenMinMS {
		ps.mustBe("store.reopen_max_ms", ">= store.reopen_min_ms", c.Store.ReopenMaxMS)
	}
	positive(ps, "store.commit_stall_ms", c.Store.CommitStallMS)
	nonNegative(ps, "store.background_write_mb_per_s", c.Store.BackgroundWriteMBPerSec)
	nonNegative(ps, "store.delete_mb_per_s", c.Store.DeleteMBPerSec)
	if n := c.Store.CommitThreadNice; n < -20 || n > 19 {
		ps.mustBe("store.commit_thread_nice", "in -20..19", n)
	}
	positive(ps, "health.sink_error_window_ms", c.Health.SinkErrorWindowMS)

	if c.Debug.KillFile != "" && !c.Debug.Chaos {
		ps.add("debug.kill_file", "requires debug.chaos: true (kill injection is off without it)")
	}
	if k := c.Debug.EraseKillStage; k != "" {
		if !c.Debug.Chaos {
			ps.add("debug.erase_kill_stage", "requires debug.chaos: true (kill injection is off without it)")
		} else if stages := []string{"rows", "sources", "claims", "fleet", "commit"}; !slices.Contains(stages, k) {
			ps.oneOf("debug.erase_kill_stage", stages, k)
		}
	}

	c.validateTrust(ps)
	c.validateStorage(ps)
	if c.Node.ID != "" && !validID(c.Node.ID) {
		ps.add("node.id", "must match [A-Za-z0-9_-]{1,64}, got %s", quote(c.Node.ID))
	}

	for id, s := range c.Sources {
		c.validateSource(ps, id, s)
	}
}

func (c *Config) validateRoles(ps *problems) {
	if len(c.Node.Roles) == 0 {
		ps.add("node.roles", "must list at least one of %s", strings.Join(roleNames, "|"))
		return
	}
	bad := false
	for i, r := range c.Node.Roles {
		switch {
		case !slices.Contains(roleNames, r):
			ps.oneOf(index("node.roles", i), roleNames, r)
			bad = true
		case slices.Index(c.Node.Roles, r) < i:
			ps.add(index("node.roles", i), "duplicate role %q", r)
		}
	}
	if !bad && len(c.EffectiveRoles()) == 0 {
		// Design: "Under wal: :none … Ankusa.Config.new/1 drops :dispatch and :storage from the effective list".
		ps.add("node.roles", "wal.type none drops dispatch and storage, which leaves no role (add edge or claim_check)")
	}
}

func (c *Config) validateSource(ps *problems, id string, s Source) {
	p := join("sources", id)
	if !validID(id) {
		// The id is already in the path; ankusa:lifecycle, the reserved lifecycle id, fails here too.
		ps.add(p, "source id must match [A-Za-z0-9_-]{1,64}")
	}
	if !validID(s.Tenant) {
		ps.add(join(p, "tenant"), "must match [A-Za-z0-9_-]{1,64}, got %s", quote(s.Tenant))
	}
	if s.Retry != nil {
		validateRetry(ps, join(p, "retry"), *s.Retry)
	}
	validateSourceTrust(ps, p, s)
	sp := join(p, "sinks")
	if len(s.Sinks) == 0 {
		ps.add(sp, "must list at least one sink")
		return
	}
	durable := validateSinkTypes(ps, sp, s.Sinks)
	if c.WAL.Type == WALNone && !durable {
		// Design: "boot refuses a wal: :none config in which no sink of a static source can make it".
		ps.add(sp, "wal.type none needs at least one durable sink")
	}
}

// validateSinkTypes checks the type of every entry of a sinks list at path and reports whether one is durable.
func validateSinkTypes(ps *problems, path string, ks []SinkSpec) (durable bool) {
	for i, k := range ks {
		switch {
		case k.Type == "":
			ps.add(join(index(path, i), "type"), "is required (one of %s)", strings.Join(sinkTypes, "|"))
		case !slices.Contains(sinkTypes, k.Type):
			ps.oneOf(join(index(path, i), "type"), sinkTypes, k.Type)
		}
		durable = durable || k.Durable()
	}
	return durable
}

func positive[T int | int64](ps *problems, path string, v T) {
	if v <= 0 {
		ps.mustBe(path, "> 0", v)
	}
}

func nonNegative[T int | int64](ps *problems, path string, v T) {
	if v < 0 {
		ps.mustBe(path, ">= 0", v)
	}
}

func checkPort(ps *problems, path string, p int) {
	if p < 0 || p > 65535 {
		ps.mustBe(path, "0..65535", p)
	}
}

// quote shows a non-secret value in a problem message: quoted and cut to 64 characters.
func quote(s string) string {
	if utf8.RuneCountInString(s) > 64 {
		s = string([]rune(s)[:64]) + "…"
	}
	return strconv.Quote(s)
}

// validID is [A-Za-z0-9_-]{1,64}: instance names, tenants and source ids.
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validIP accepts only a strict IPv4 or IPv6 literal ("localhost", "10", "010.0.0.1" are refused).
func validIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// addrsOverlap reports whether listeners on a and b ("" = all interfaces) could collide on one port.
func addrsOverlap(a, b string) bool {
	if a == "" || b == "" {
		return true
	}
	x, errX := netip.ParseAddr(a)
	y, errY := netip.ParseAddr(b)
	if errX != nil || errY != nil {
		return false // reported on its own
	}
	return x.IsUnspecified() || y.IsUnspecified() || x.Unmap() == y.Unmap()
}

// prefixProblem returns the constraint http.prefix breaks, or "". The edge joins prefix and source id with
// "/", so a trailing slash or an empty, "." or ".." segment would make routes no client can reach.
func prefixProblem(p string) string {
	const want = `"/" or "/"-separated segments of [A-Za-z0-9._~-] without a trailing "/"`
	if p == "/" {
		return ""
	}
	if !strings.HasPrefix(p, "/") {
		return want
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return want
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("._~-", c) >= 0) {
				return want
			}
		}
	}
	return ""
}

// validatePrincipals checks admin.principals; a token hash is never echoed (a problem says what is wrong).
// validateTLS checks http.tls or admin.tls (at names it).
func validateTLS(ps *problems, at string, t TLS) {
	if !t.Enabled() && t.ClientAuth == "" && t.ClientCAFile == "" {
		return
	}
	if t.CertFile == "" || t.KeyFile == "" {
		ps.add(at, "cert_file and key_file are both required")
	}
	switch t.ClientAuth {
	case "", "none", "request":
	case "require":
		if t.ClientCAFile == "" {
			ps.add(at+".client_ca_file", "is required with client_auth require")
		}
	default:
		ps.oneOf(at+".client_auth", []string{"none", "request", "require"}, t.ClientAuth)
	}
}

func (c *Config) validatePrincipals(ps *problems) {
	names, hashes, certs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	t := c.Admin.TLS
	certAuth := t.Enabled() && t.ClientCAFile != "" && (t.ClientAuth == "request" || t.ClientAuth == "require")
	for n, p := range c.Admin.Principals {
		at := "admin.principals[" + strconv.Itoa(n) + "]"
		switch {
		case !validID(p.Name):
			ps.add(at+".name", "must match [A-Za-z0-9_-]{1,64}, got %s", quote(p.Name))
		case names[p.Name]:
			ps.add(at+".name", "must be unique, %s is named twice", quote(p.Name))
		}
		names[p.Name] = true
		set := 0
		for _, v := range []string{p.TokenSHA256, p.TokenFile, p.ClientCertSHA256} {
			if v != "" {
				set++
			}
		}
		switch {
		case set > 1:
			ps.add(at, "needs exactly one of token_sha256, token_file and client_cert_sha256, got %d", set)
		case set == 0:
			ps.add(at, "needs one of token_sha256 (hex of the token's SHA-256), token_file and client_cert_sha256")
		case p.ClientCertSHA256 != "":
			h := CertFingerprint(p.ClientCertSHA256)
			switch {
			case len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "":
				ps.add(at+".client_cert_sha256", "must be the 64 hex digits of the client certificate's SHA-256 fingerprint")
			case certs[h]:
				ps.add(at+".client_cert_sha256", "must be unique: two principals hold the same certificate")
			case !certAuth:
				ps.add(at+".client_cert_sha256", "needs admin.tls with cert_file, key_file, client_ca_file and client_auth request or require")
			}
			certs[h] = true
		case p.TokenSHA256 != "":
			h := strings.ToLower(p.TokenSHA256)
			if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
				ps.add(at+".token_sha256", "must be the 64 hex digits of the token's SHA-256 (never the token itself)")
			} else if hashes[h] {
				ps.add(at+".token_sha256", "must be unique: two principals hold the same token")
			}
			hashes[h] = true
		}
		if len(p.Scopes) == 0 {
			ps.add(at+".scopes", "must name at least one scope")
		}
		for k, s := range p.Scopes {
			if !slices.Contains(AdminScopes, s) {
				ps.oneOf(at+".scopes["+strconv.Itoa(k)+"]", AdminScopes, s)
			}
		}
		if len(p.Tenants) == 0 {
			ps.add(at+".tenants", `must be ["*"] (every tenant) or a list of tenant ids`)
		}
		for k, t := range p.Tenants {
			if t == "*" && len(p.Tenants) > 1 {
				ps.add(at+".tenants", `must be ["*"] alone or a list of tenant ids, not both`)
			} else if t != "*" && !validID(t) {
				ps.add(at+".tenants["+strconv.Itoa(k)+"]", "must match [A-Za-z0-9_-]{1,64} or be \"*\", got %s", quote(t))
			}
		}
	}
}

// validateIntake checks the intake section; brokers are required only under wal.type dual.
func (c *Config) validateIntake(ps *problems) {
	in := c.Intake
	if c.WAL.Type == WALDual && len(in.Brokers) == 0 {
		ps.add("intake.brokers", "wal.type dual needs at least one broker")
	}
	for i, b := range in.Brokers {
		if b == "" {
			ps.mustBe("intake.brokers["+strconv.Itoa(i)+"]", "host:port", quote(b))
		}
	}
	if in.Topic == "" {
		ps.mustBe("intake.topic", "a topic name", quote(in.Topic))
	}
	if in.NodeID != "" && !validNodeID(in.NodeID) {
		ps.mustBe("intake.node_id", "[A-Za-z0-9._=-]{1,128}", quote(in.NodeID))
	}
	positive(ps, "intake.breaker_failures", in.BreakerFailures)
	positive(ps, "intake.retry_after_s", in.RetryAfterS)
	positive(ps, "intake.publish_timeout_ms", in.PublishTimeoutMS)
	positive(ps, "intake.reconcile_interval_ms", in.ReconcileIntervalMS)
	positive(ps, "intake.max_inflight", in.MaxInflight)
	if in.MaxRecordBytes < 65536 {
		ps.mustBe("intake.max_record_bytes", ">= 65536", in.MaxRecordBytes)
	}
}

// validNodeID: a node id becomes part of object keys and log records.
func validNodeID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '=', r == '-':
		default:
			return false
		}
	}
	return true
}
