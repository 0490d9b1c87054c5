package config

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/ankusa-go/ankusa/verify"
)

// Roles a node can run (node.roles, ANKUSA_ROLES).
const (
	RoleEdge       = "edge"
	RoleDispatch   = "dispatch"
	RoleStorage    = "storage"
	RoleClaimCheck = "claim_check"
)

// WAL types (wal.type, ANKUSA_WAL_TYPE).
const (
	WALDisk = "disk"
	WALDual = "dual"
	WALNone = "none"
)

// Config is the configuration of one instance. Its yaml tags are the documented keys.
type Config struct {
	Instance string `yaml:"instance"` // default "default"; [A-Za-z0-9_-]{1,64}
	Node     Node   `yaml:"node"`
	Log      Log    `yaml:"log"`
	HTTP     HTTP   `yaml:"http"`
	// MaxBodyBytes is the top-level alias of http.max_body_bytes: when set (non-zero) in the file it wins,
	// and after Load both hold the effective value. Consumers read HTTP.MaxBodyBytes, so code editing a
	// built Config sets that one.
	MaxBodyBytes int64    `yaml:"max_body_bytes"`
	Admin        Admin    `yaml:"admin"`
	WAL          WAL      `yaml:"wal"`
	Intake       Intake   `yaml:"intake"`
	Batcher      Batcher  `yaml:"batcher"`
	Listener     Listener `yaml:"listener"`
	Dispatch     Dispatch `yaml:"dispatch"`
	// RateLimits, Quarantine and Dedupe bound what one sender can spend (trust.go).
	RateLimits RateLimits `yaml:"rate_limits"`
	Quarantine Quarantine `yaml:"quarantine"`
	Dedupe     Dedupe     `yaml:"dedupe"`
	// Fleet is the shared store rate_limits.scope and dedupe.scope fleet count in (trust.go).
	Fleet Fleet `yaml:"fleet"`
	Store Store `yaml:"store"`
	// Storage, Archive, Backup and ClaimCheck keep copies off the store (storage.go).
	Storage    Storage    `yaml:"storage"`
	Archive    Archive    `yaml:"archive"`
	Backup     Backup     `yaml:"backup"`
	ClaimCheck ClaimCheck `yaml:"claim_check"`
	Health     Health     `yaml:"health"`
	// Audit is the trail of operator changes (admin API).
	Audit Audit `yaml:"audit"`
	// Lifecycle publishes source and tenant changes as CloudEvents to its sinks (off when it lists none). Its
	// sink options are walked like a source's, never echoed in a problem.
	Lifecycle Lifecycle `yaml:"lifecycle" config:"noecho"`
	// SourceStore is where the sources managed through the admin API live (the file's are always read-only).
	SourceStore SourceStore `yaml:"source_store"`
	// Routes is the edge's route guard (routes.go).
	Routes Routes `yaml:"routes"`
	// Debug holds test-only switches; every one is off by default and none belongs in production.
	Debug Debug `yaml:"debug"`
	// Sources are walked without echoing values in problems: sink options and verifier secrets live here.
	Sources map[string]Source `yaml:"sources" config:"noecho"`

	// Set by Load, not from YAML:
	File     string   `yaml:"-"` // path read, "" when the embedded default was used
	Embedded bool     `yaml:"-"` // true when no file was found and the embedded default was used
	Warnings []string `yaml:"-"` // boot warnings (roles dropped under wal none, embedded default in use)
}

// Node is the node section.
type Node struct {
	// ID names this node in shared object stores (archive segment keys, backups): [A-Za-z0-9_-]{1,64},
	// default the instance name. Nodes sharing a bucket need distinct ids (or storage.key_prefix); a node that
	// replaces a lost one keeps its id.
	ID      string   `yaml:"id"`
	DataDir string   `yaml:"data_dir"` // default "./data"
	Roles   []string `yaml:"roles"`    // default [edge, dispatch, storage]; allowed edge, dispatch, storage, claim_check
}

// Log is the log section.
type Log struct {
	Level string `yaml:"level"` // default "info"; debug|info|warning|error
	// Format is "auto" (default: human-readable console lines when stderr is a terminal, JSON lines
	// otherwise), "json" or "console".
	Format string `yaml:"format"`
}

// HTTP is the ingest listener.
type HTTP struct {
	IP      string `yaml:"ip"`      // default "" = all interfaces; otherwise a strict IPv4/IPv6 literal
	Port    int    `yaml:"port"`    // default 4000; 0..65535 (0 = pick a free port)
	Prefix  string `yaml:"prefix"`  // default "/webhooks"; must start with "/"; "/" means no prefix
	Routing string `yaml:"routing"` // default "path"; path|tenant_path
	// MaxURLTenants bounds the tenants tenant_path URLs may mint for shared sources without an allow-list
	// (url_tenants, tenant_secrets), beyond the tenants the config names and those already in the store:
	// past it a new tenant's URL finds no source (404 unknown_source). Default 1000; > 0.
	MaxURLTenants int   `yaml:"max_url_tenants"`
	MaxBodyBytes  int64 `yaml:"max_body_bytes"` // default 8_000_000; > 0
	// MaxConns caps the ingest connections open at once on the node; past it a new connection gets
	// 503 {"error":"overload"} + Retry-After and is closed. Default 10_000; > 0.
	MaxConns int `yaml:"max_conns"`
	// MaxConnsPerIP caps the connections one client address (an IPv6 /64) holds; past it 429
	// {"error":"too_many_connections"}. Default 512; 0 = no cap (behind a proxy every client shares its address).
	MaxConnsPerIP int `yaml:"max_conns_per_ip"`
	// MaxReadingBytes bounds the body bytes held by requests not yet answered (being read, or read and
	// waiting for the commit) on the node: a request reserves its Content-Length before its body is read
	// (a chunked one as it grows); past it 503 overload. Default 268_435_456; >= max_body_bytes.
	MaxReadingBytes int64 `yaml:"max_reading_bytes"`
	// MaxReadingBytesPerIP is the same bound per client address (an IPv6 /64); past it 429 ip_overload.
	// Default 67_108_864; >= max_body_bytes.
	MaxReadingBytesPerIP int64 `yaml:"max_reading_bytes_per_ip"`
	// HeaderTimeoutMS bounds the time from a connection's open (or a keep-alive request's first byte)
	// to the end of the request head; a deadline, so a slow client cannot stretch it. Default 10_000; > 0.
	HeaderTimeoutMS int `yaml:"header_timeout_ms"`
	// ReadTimeoutMS bounds reading the body once the head is in, as one deadline. Default 30_000; > 0.
	ReadTimeoutMS int `yaml:"read_timeout_ms"`
	// IdleTimeoutMS closes a keep-alive connection that sends no next request. Default 60_000; > 0.
	IdleTimeoutMS int `yaml:"idle_timeout_ms"`
	// TLS serves the ingest port over TLS when cert_file and key_file are set.
	TLS TLS `yaml:"tls"`
}

// TLS is the ingest listener's TLS (http.tls).
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientAuth asks clients for a certificate: none (default) | request (any certificate; client_cert
	// sources check it against their pins) | require (a certificate signed by client_ca_file).
	ClientAuth   string `yaml:"client_auth"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether the ingest listener serves TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Admin is the operator API listener (and /metrics).
type Admin struct {
	Enabled bool   `yaml:"enabled"` // default true
	IP      string `yaml:"ip"`      // default "127.0.0.1"; strict IP literal ("localhost" rejected)
	Port    int    `yaml:"port"`    // default 4002; 0..65535
	// MetricsAuth makes GET /metrics require a bearer token with metrics:read (default false: the listener
	// binds loopback by default and the scrape holds no per-source series from unauthenticated input).
	MetricsAuth bool `yaml:"metrics_auth"`
	// Principals may call the /v1 operator API; with none, every /v1 route answers 401.
	Principals []Principal `yaml:"principals"`
	// TLS serves the admin port over TLS when cert_file and key_file are set, with the keys of http.tls.
	// With client_ca_file set, a client certificate is verified against it (client_auth request: when
	// one is sent; require: always), and principals with client_cert_sha256 are matched by it.
	TLS TLS `yaml:"tls"`
}

// Principal is one caller of the operator API: a bearer token known only by its SHA-256, the scopes it
// holds and the tenants it may see ("*" = every tenant).
type Principal struct {
	Name string `yaml:"name"` // [A-Za-z0-9_-]{1,64}, unique; names the caller in logs
	// TokenSHA256 is the lower- or upper-case hex SHA-256 of the token (64 hex digits); the token itself is
	// never configured. Exactly one of token_sha256 and token_file.
	TokenSHA256 string `yaml:"token_sha256" config:"secret"`
	// TokenFile holds the token itself (surrounding white space ignored); the node hashes it at boot.
	TokenFile string `yaml:"token_file"`
	// ClientCertSHA256 is the hex SHA-256 of the DER of the client certificate (the leaf) this principal
	// presents over admin.tls (openssl x509 -noout -fingerprint -sha256, colons allowed). The certificate
	// must also chain to admin.tls.client_ca_file. Exactly one of token_sha256, token_file and it.
	ClientCertSHA256 string   `yaml:"client_cert_sha256"`
	Scopes           []string `yaml:"scopes"`  // at least one of AdminScopes
	Tenants          []string `yaml:"tenants"` // ["*"], or tenant ids
}

// CertFingerprint normalizes a client_cert_sha256: lower case, colons and spaces dropped.
func CertFingerprint(s string) string {
	return strings.ToLower(strings.NewReplacer(":", "", " ", "").Replace(s))
}

// AdminScopes are the scopes a principal may hold.
var AdminScopes = []string{
	"sources:read", "sources:write", "routes:read", "routes:write", "rate_limits:write", "quarantine:read", "quarantine:write",
	"replays:write", "dlq:read", "audit:read", "tenants:write", "config:read", "metrics:read", "log_level:write",
}

// WAL selects where an acknowledged hook is made durable before the 201.
type WAL struct {
	Type             string `yaml:"type"`               // default "disk"; disk|dual|none
	PublishTimeoutMS int    `yaml:"publish_timeout_ms"` // default 8000; > 0 (wal.type none only)
}

// Audit is the audit trail (inventory G.6).
type Audit struct {
	// RetentionDays: rows older than this are pruned (never one the lifecycle publisher has not passed).
	// Default 365; > 0.
	RetentionDays int `yaml:"retention_days"`
}

// Intake is the intake log of wal.type dual: a replicated Kafka topic every commit group is confirmed in
// before its 201.
type Intake struct {
	Brokers []string `yaml:"brokers"` // seed brokers; required under wal.type dual
	Topic   string   `yaml:"topic"`   // default "ankusa-intake"; created by the operator (RF 3, min.insync.replicas 2)
	// NodeID is this node's identity in the log; a replacement node reuses the lost node's. Default: node.id,
	// else the instance name.
	NodeID              string `yaml:"node_id"`
	BreakerFailures     int    `yaml:"breaker_failures"`      // default 3; > 0
	RetryAfterS         int    `yaml:"retry_after_s"`         // default 2; > 0
	PublishTimeoutMS    int    `yaml:"publish_timeout_ms"`    // default 5000; > 0
	ReconcileIntervalMS int    `yaml:"reconcile_interval_ms"` // default 1000; > 0
	MaxInflight         int    `yaml:"max_inflight"`          // default 8; groups awaiting their confirm; > 0
	MaxRecordBytes      int    `yaml:"max_record_bytes"`      // default 900000; a group is split into records of at most this; >= 65536
}

// SourceStore is source_store (inventory G.2).
type SourceStore struct {
	// Type is persistent (default: this node's store), static (the file only: every API write is 409) or
	// redis (a Redis shared by a fleet, source_store.redis).
	Type string `yaml:"type"`
	// Redis is the shared store of type redis (key_prefix default "ankusa:sources:").
	Redis FleetStore `yaml:"redis"`
}

// Source store types (source_store.type).
const (
	SourceStoreStatic     = "static"
	SourceStorePersistent = "persistent"
	SourceStoreRedis      = "redis"
)

// Health tunes the readiness checks (/ready).
type Health struct {
	// SinkErrorWindowMS (wal.type none): a sink whose last publish failed less than this long ago, with no
	// success since, makes /ready 503 naming it. Default 30_000; > 0. The original published no default.
	SinkErrorWindowMS int `yaml:"sink_error_window_ms"`
}

// Debug is the debug section: switches black-box tests need to drive the binary into states a
// healthy machine never reaches on demand. Off by default; never set in production.
type Debug struct {
	// HoldCommitsFile, when set, makes every synced store write wait while a file exists at this path
	// (checked every 10 ms), as a stalled disk would: a test creates the file, sends requests that stay
	// in flight, then removes it.
	HoldCommitsFile string `yaml:"hold_commits_file"`
	// Chaos turns kill injection on: every actor of the tree (dispatch lanes included) can then be
	// crashed by name (Instance.Kill, debug.kill_file) for chaos drills. Off, no actor carries the
	// injection and arming a name does nothing.
	Chaos bool `yaml:"chaos"`
	// KillFile, when set, is kill injection from outside the process: while a file exists at this path
	// holding an actor's path under the instance (edge/writer), that actor is crashed by every ordinary
	// message it receives (re-armed every 10 ms), as a bug that crashes it each time would. Requires
	// Chaos.
	KillFile string `yaml:"kill_file"`
	// EraseKillStage, when set, makes a tenant erase job SIGKILL the process right after it synced this stage
	// (rows, sources, claims, fleet or commit), as a kill -9 there would: the black-box test of the job's resumption.
	EraseKillStage string `yaml:"erase_kill_stage"`
}

// Batcher sizes the per-partition batchers and the writer's group commit.
type Batcher struct {
	// Partitions defaults to 2: the seed says "default two" in prose and "4 by default" in its guarantee
	// table; the original repository uses 2, one per core on the reference machine.
	Partitions          int   `yaml:"partitions"`
	MaxBatch            int   `yaml:"max_batch"`              // default 256 records per batch
	MaxDelayMS          int   `yaml:"max_delay_ms"`           // default 0 (no linger; may be 0)
	MaxQueue            int   `yaml:"max_queue"`              // default 10_000 per partition, records buffered + in flight
	MaxQueueBytes       int64 `yaml:"max_queue_bytes"`        // default 268_435_456 body bytes, buffered + in flight
	MaxCommits          int   `yaml:"max_commits"`            // default 64 commit tasks in flight per partition
	GroupCommitMaxBytes int64 `yaml:"group_commit_max_bytes"` // default 4 MiB per synced write
	// GroupCommitMaxRecords was not published by the original; 4096 is 16 full batches of the default
	// max_batch, enough to merge every partition's batch in one synced write at default sizes.
	GroupCommitMaxRecords int `yaml:"group_commit_max_records"`
	RecordDeadlineMS      int `yaml:"record_deadline_ms"` // default 15_000: a record not committing by then is dropped (503)
}

// Listener governs the SIGTERM drain.
type Listener struct {
	DrainDelayMS   int `yaml:"drain_delay_ms"`   // default 5000 (may be 0): keep serving after /ready flips
	DrainTimeoutMS int `yaml:"drain_timeout_ms"` // default 30000: wait for batchers to empty
}

// Source is one static source (sources.<source_id>).
type Source struct {
	Tenant string     `yaml:"tenant"` // default "default"; [A-Za-z0-9_-]{1,64}
	Sinks  []SinkSpec `yaml:"sinks"`  // at least one
	// Retry overrides dispatch.retry for this source.
	Retry *Retry `yaml:"retry"`
	// ForwardHeaders, when set, is the list of stored headers a sink forwards (default: every
	// non-credential, non-hop-by-hop header).
	ForwardHeaders []string `yaml:"forward_headers"`
	// ForwardProxyHeaders (default false) lets the default forward filter pass forwarded, x-forwarded-*,
	// x-real-ip and the other client-address headers to sinks; the caller writes them, so they are off.
	ForwardProxyHeaders bool `yaml:"forward_proxy_headers"`

	// Verify authenticates the source's requests (default: type none, every hook stored as skipped).
	// Validated by verify.Spec.Validate; its secret is never echoed or printed.
	Verify verify.Spec `yaml:"verify"`
	// OnVerifyFailure is reject (default) | quarantine | accept_flag; "" in a Source built in code is reject.
	OnVerifyFailure string `yaml:"on_verify_failure"`
	// Dedupe names the provider's event key; nil (the default) = no dedupe, a provider retry is a new hook.
	Dedupe *DedupeSpec `yaml:"dedupe"`
	// StoreHeaders drops (default) or hashes credential headers before the hook is stored.
	StoreHeaders StoreHeaders `yaml:"store_headers"`
	// VerifyFailureBytes is the source's verification budget: the bytes its failed verifications may
	// hash per second (body size times the keys and signatures tried), refilling a bucket of Burst bytes.
	// While the source is over it, its requests are refused before the body is read (429
	// verify_rate_limited). nil (the default) = {DefaultVerifyFailureRate,
	// DefaultVerifyFailureBurst}.
	VerifyFailureBytes *Rate `yaml:"verify_failure_bytes"`
	// TrustURLTenant (default false) accepts that a shared source takes the tenant its URL names under
	// http.routing tenant_path even though it verifies nothing. Under tenant_path a shared source that
	// verifies nothing must set it (boot refuses otherwise).
	TrustURLTenant bool `yaml:"trust_url_tenant"`
	// URLTenants is the allow-list of tenants a tenant_path URL may name for this shared source; another
	// tenant's URL finds no source (404 unknown_source). Default none: http.max_url_tenants bounds them.
	URLTenants []string `yaml:"url_tenants"`
	// TenantSecrets gives each URL tenant of a shared source its own secret (or public key, for ed25519),
	// replacing verify.secret (verify.public_key) for that tenant, so a hook signed for one tenant does not
	// verify under another's URL. When set, its tenants are the source's allow-list. Default none.
	TenantSecrets map[string]verify.Secrets `yaml:"tenant_secrets" config:"secret"`
	// Handshake is the provider's subscription handshake the edge answers for this source without storing
	// a hook (docs/providers.md): slack, zoom, twitter (implied by those verify presets), meta, dropbox,
	// msgraph, or none. Default: the verify preset's own, else none.
	Handshake string `yaml:"handshake"`
	// HandshakeToken is Meta's verify token, compared in constant time with hub.verify_token (handshake
	// meta, required there).
	HandshakeToken verify.Secrets `yaml:"handshake_token" config:"secret"`
}

// Handshakes are the subscription handshakes a source may name (docs/providers.md).
var Handshakes = []string{"none", "slack", "zoom", "twitter", "meta", "dropbox", "msgraph"}

// HandshakeKind is the handshake a source answers: the one it names, else the one its verify preset
// implies (slack, zoom, twitter), else "none".
func (s Source) HandshakeKind() string {
	if s.Handshake != "" {
		return s.Handshake
	}
	switch s.Verify.Type {
	case "slack", "zoom", "twitter":
		return s.Verify.Type
	}
	return "none"
}

// SinkSpec is one entry of a source's sinks list. Its options are validated by the sink packages.
type SinkSpec struct {
	Type    string         // required: log|http|kafka|rabbitmq|nats|redis|sqs|google_pubsub
	Ordered bool           // `ordered: true`: one delivery at a time, in seq order
	Options map[string]any // every other key of the entry (string, int, float64, bool, nil, []any, map[string]any)
}

// sinkTypes lists the sink types a SinkSpec may name, in documentation order (read-only).
var sinkTypes = []string{"log", "http", "kafka", "rabbitmq", "nats", "redis", "sqs", "google_pubsub"}

// Durable reports whether the sink's confirm means the destination kept the hook: log and redis (pub/sub,
// lost without a subscriber) are not durable; an unknown type is not either, since nothing vouches for it.
func (s SinkSpec) Durable() bool {
	switch s.Type {
	case "http", "kafka", "rabbitmq", "nats", "sqs", "google_pubsub":
		return true
	default:
		return false
	}
}

// EffectiveRoles returns the roles this node runs, sorted and without duplicates. Under wal.type none
// dispatch and storage are dropped: with no queue they have nothing to read.
func (c *Config) EffectiveRoles() []string {
	roles := make([]string, 0, len(c.Node.Roles))
	for _, r := range c.Node.Roles {
		if c.WAL.Type == WALNone && (r == RoleDispatch || r == RoleStorage) {
			continue
		}
		roles = append(roles, r)
	}
	slices.Sort(roles)
	return slices.Compact(roles)
}

// HasRole reports whether r is one of the effective roles.
func (c *Config) HasRole(r string) bool {
	return slices.Contains(c.EffectiveRoles(), r)
}

// StoreDir is the instance's RocksDB directory: <data_dir>/<instance>/store.
func (c *Config) StoreDir() string {
	return filepath.Join(c.Node.DataDir, c.Instance, "store")
}

// Store is how the node keeps its store writable (docs/architecture.md, "Store recovery").
type Store struct {
	// ReopenMinMS (default 5000): after a failed write the store is reopened at most once per this interval;
	// it is also the first back-off of a reopen that fails. > 0.
	ReopenMinMS int `yaml:"reopen_min_ms"`
	// ReopenMaxMS (default 60000): the back-off doubles (jittered) up to this. >= reopen_min_ms.
	ReopenMaxMS int `yaml:"reopen_max_ms"`
	// CommitStallMS (default 5000): a synced write running longer than this flips /ready to 503
	// commit_stalled and counts a stall; the write itself is still waited for. > 0.
	CommitStallMS int `yaml:"commit_stall_ms"`
	// BackgroundWriteMBPerSec (default 0: unpaced): the rate, in MiB/s, at which RocksDB's flushes and compactions may
	// write. Unpaced, a memtable flush writes at the disk's full speed and the synced WAL writes of the acks
	// wait behind it (the file system's journal commit orders them after its data); paced, they slip in
	// between. It must stay well above the sustained ingest rate in bytes, or flushes fall behind and writes
	// stall; flat out, ingest's flushes and compactions write several times its body bytes, so the default
	// leaves them unpaced (docs/configuration.md has the measured trade). >= 0.
	BackgroundWriteMBPerSec int `yaml:"background_write_mb_per_s"`
	// DeleteMBPerSec (default 256): the rate, in MiB/s, at which RocksDB deletes its obsolete WAL and table
	// files, 1 MiB at a time; 0 unlinks each at once. On a file system mounted with online discard, freeing a
	// file's blocks trims them within the journal commit every synced write waits for, so a WAL file of tens of
	// MiB unlinked at once holds the acks for as long as the device takes to trim it. It must stay above the
	// rate the node writes its WAL at (about the ingest rate in bytes), or obsolete files wait on disk. >= 0.
	DeleteMBPerSec int `yaml:"delete_mb_per_s"`
	// CommitThreadNice (default -10): the nice value of the thread that makes the group commit's synced write,
	// which every ack waits for; 0 leaves it the process's. A value below the process's needs CAP_SYS_NICE or
	// an RLIMIT_NICE allowing it: without either the node logs that once per store open and runs the thread at
	// the process's priority. -20..19.
	CommitThreadNice int `yaml:"commit_thread_nice"`
}

// Lifecycle is the lifecycle section: the sinks every source and tenant change is published to, as a
// CloudEvents 1.0 JSON body, at least once and in commit order. Empty: no event is published.
type Lifecycle struct {
	Sinks []SinkSpec `yaml:"sinks"`
}

// LifecycleEnabled reports whether lifecycle.sinks lists a sink (a store is needed to keep the outbox).
func (c *Config) LifecycleEnabled() bool { return len(c.Lifecycle.Sinks) > 0 && c.WAL.Type != WALNone }
