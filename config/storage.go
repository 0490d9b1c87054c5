package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Blob store types (storage.type, backup.store.type, claim_check.store.type).
const (
	BlobLocal = "local"
	BlobS3    = "s3"
)

var blobTypes = []string{BlobLocal, BlobS3}

// BlobStore names one object store: a directory on this host (local) or an S3 bucket (AWS, MinIO, R2, ...,
// addressed path-style).
type BlobStore struct {
	Type string `yaml:"type"` // local (default) | s3
	// Root is the local store's directory; "" means the section's default (storage: <data_dir>/<instance>/segments).
	Root string `yaml:"root"`
	// KeyPrefix is prepended to every key this node writes: `name/` parts of [A-Za-z0-9._-]. Nodes sharing a
	// bucket need distinct node ids or prefixes.
	KeyPrefix string `yaml:"key_prefix"`
	S3        S3     `yaml:"s3"`
}

// S3 addresses a bucket. Without access_key_id the standard AWS credential chain is used (environment,
// shared files, instance role).
type S3 struct {
	Bucket          string `yaml:"bucket"`
	Region          string `yaml:"region"`   // default "us-east-1"
	Endpoint        string `yaml:"endpoint"` // "" = AWS; otherwise the service URL (path-style addressing)
	AccessKeyID     string `yaml:"access_key_id"`
	SecretAccessKey string `yaml:"secret_access_key" config:"secret"`
	SessionToken    string `yaml:"session_token" config:"secret"`
}

// Storage is the storage role: the archive compactor and the blob store it (and, by default, backups and
// claim packs) writes to.
type Storage struct {
	Type      string `yaml:"type"` // local (default) | s3
	Root      string `yaml:"root"` // local store directory; default <data_dir>/<instance>/segments
	KeyPrefix string `yaml:"key_prefix"`
	S3        S3     `yaml:"s3"`
	// RollBytes caps one segment's records (default 16 MiB); the compactor packs obligations up to it.
	RollBytes int64 `yaml:"roll_bytes"`
	// RollMS (default 30_000): obligations younger than this wait for more unless they fill roll_bytes, so a
	// quiet node still writes a segment at least this often without writing tiny ones every tick.
	RollMS int `yaml:"roll_ms"`
	// IntervalMS is the compactor's tick (default 1000); a failed tick backs off ×2, jittered, up to 60 s.
	IntervalMS int `yaml:"interval_ms"`
	// PacePercent (default 25; 100 = never paced): while hooks are being committed and the archive backlog is
	// within max_lag_segments and max_lag_ms, the compactor works at most this share of the time, pausing after
	// each compaction, so it yields the cores (and the disk) to ingest.
	PacePercent int `yaml:"pace_percent"`
	// MaxLagSegments (default 4): a backlog of this many roll_bytes segments makes the compactor run flat out.
	MaxLagSegments int `yaml:"max_lag_segments"`
	// MaxLagMS (default 60_000): a backlog whose oldest hooks are this old makes the compactor run flat out.
	MaxLagMS int `yaml:"max_lag_ms"`
	// Codec of segment records: raw (the only one).
	Codec string `yaml:"codec"`
	// CatalogueRetentionDays (default 0 = forever): older segments are hidden from fetch and replay.
	CatalogueRetentionDays int `yaml:"catalogue_retention_days"`
}

// Archive is the archive's retention policy.
type Archive struct {
	// RetentionDays (default 0 = off) deletes a segment, its index and its catalogue row once its newest hook is
	// that old; never above storage.catalogue_retention_days when that is set.
	RetentionDays int `yaml:"retention_days"`
}

// Backup copies the store to an object store so a lost host loses at most interval_ms of acked hooks.
type Backup struct {
	Enabled    bool `yaml:"enabled"`     // default false
	IntervalMS int  `yaml:"interval_ms"` // default 60_000: the recovery point of wal.type disk
	Keep       int  `yaml:"keep"`        // default 3 backups kept; older ones and their unreferenced files are purged
	// Store is where backups go; nil = the storage blob store under storage.key_prefix.
	Store *BlobStore `yaml:"store"`
	// Secondary, when set, receives a second copy; a restore falls back to it.
	Secondary *BlobStore `yaml:"secondary"`
	// SigningKey signs every backup manifest (HMAC-SHA256); a restore or verify refuses a manifest whose
	// signature does not match. Required when backups are enabled.
	SigningKey string `yaml:"signing_key" config:"secret"`
	// VerifyIntervalMS (default 3_600_000; 0 = off) reads the latest backup back and checks its signature,
	// sizes and digests.
	VerifyIntervalMS int `yaml:"verify_interval_ms"`
	// RequireFresh makes /ready 503 while the last successful backup is older than 3 intervals.
	RequireFresh bool `yaml:"require_fresh"`
}

// ClaimCheck is the claim-check role: large bodies checked into packs in a blob store, served read-only.
type ClaimCheck struct {
	IP   string `yaml:"ip"`   // default "127.0.0.1"
	Port int    `yaml:"port"` // default 4001
	// PackMaxBytes is the target pack size (default 16 MiB); a bigger body gets a pack of its own.
	PackMaxBytes int64 `yaml:"pack_max_bytes"`
	// RetentionDays (default 0 = keep) deletes whole day partitions of a local store; buckets use lifecycle rules.
	RetentionDays   int `yaml:"retention_days"`
	SweepIntervalMS int `yaml:"sweep_interval_ms"` // default 3_600_000
	// Store is where packs go; nil = the storage blob store (claim keys are never prefixed).
	Store *BlobStore `yaml:"store"`
	// Auth says who may redeem claims from the gateway.
	Auth ClaimAuth `yaml:"auth"`
}

// ClaimAuth authenticates the claim gateway's readers with static bearer tokens. A reader needs a token with
// the scope claims:read whose tenants include the claim's tenant ("*" = every tenant).
type ClaimAuth struct {
	Tokens []ClaimToken `yaml:"tokens"`
}

// ClaimToken is one bearer token and what it grants.
type ClaimToken struct {
	Token   string   `yaml:"token" config:"secret"` // at least 16 bytes
	Scopes  []string `yaml:"scopes"`                // claims:read
	Tenants []string `yaml:"tenants"`               // tenant ids, or "*"
}

// ScopeClaimsRead lets a token read claims (claim_check.auth.tokens[].scopes).
const ScopeClaimsRead = "claims:read"

func defaultStorage() Storage {
	return Storage{
		Type:           BlobLocal,
		S3:             S3{Region: "us-east-1"},
		RollBytes:      16 << 20,
		RollMS:         30_000,
		IntervalMS:     1000,
		PacePercent:    25,
		MaxLagSegments: 4,
		MaxLagMS:       60_000,
		Codec:          "raw",
	}
}

func defaultBackup() Backup {
	return Backup{IntervalMS: 60_000, Keep: 3, VerifyIntervalMS: 3_600_000}
}

func defaultClaimCheck() ClaimCheck {
	return ClaimCheck{IP: "127.0.0.1", Port: 4001, PackMaxBytes: 16 << 20, SweepIntervalMS: 3_600_000}
}

// SegmentsDir is the default local blob store root: <data_dir>/<instance>/segments.
func (c *Config) SegmentsDir() string {
	return filepath.Join(c.Node.DataDir, c.Instance, "segments")
}

// StorageBlobStore is the storage section's blob store with its local root filled in.
func (c *Config) StorageBlobStore() BlobStore {
	s := c.Storage
	b := BlobStore{Type: s.Type, Root: s.Root, KeyPrefix: s.KeyPrefix, S3: s.S3}
	if b.Type == BlobLocal && b.Root == "" {
		b.Root = c.SegmentsDir()
	}
	return b
}

// BackupBlobStore is where backups go: backup.store, else the storage blob store.
func (c *Config) BackupBlobStore() BlobStore {
	if c.Backup.Store != nil {
		return *c.Backup.Store
	}
	return c.StorageBlobStore()
}

// ClaimBlobStore is where claim packs go: claim_check.store, else the storage blob store without its prefix
// (claim ids are unique across nodes, and consumers of every node redeem from one place).
func (c *Config) ClaimBlobStore() BlobStore {
	if c.ClaimCheck.Store != nil {
		return *c.ClaimCheck.Store
	}
	b := c.StorageBlobStore()
	b.KeyPrefix = ""
	return b
}

func (c *Config) validateStorage(ps *problems) {
	validateBlobStore(ps, "storage", c.StorageBlobStore())
	positive(ps, "storage.roll_bytes", c.Storage.RollBytes)
	positive(ps, "storage.roll_ms", c.Storage.RollMS)
	positive(ps, "storage.interval_ms", c.Storage.IntervalMS)
	if p := c.Storage.PacePercent; p < 1 || p > 100 {
		ps.mustBe("storage.pace_percent", "1..100", p)
	}
	positive(ps, "storage.max_lag_segments", c.Storage.MaxLagSegments)
	positive(ps, "storage.max_lag_ms", c.Storage.MaxLagMS)
	if c.Storage.Codec != "raw" {
		ps.oneOf("storage.codec", []string{"raw"}, c.Storage.Codec)
	}
	nonNegative(ps, "storage.catalogue_retention_days", c.Storage.CatalogueRetentionDays)
	nonNegative(ps, "archive.retention_days", c.Archive.RetentionDays)
	if cr := c.Storage.CatalogueRetentionDays; cr > 0 && c.Archive.RetentionDays > cr {
		ps.mustBe("archive.retention_days", "<= storage.catalogue_retention_days", c.Archive.RetentionDays)
	}

	b := c.Backup
	positive(ps, "backup.interval_ms", b.IntervalMS)
	positive(ps, "backup.keep", b.Keep)
	nonNegative(ps, "backup.verify_interval_ms", b.VerifyIntervalMS)
	if b.Store != nil {
		validateBlobStore(ps, "backup.store", *b.Store)
		needsRoot(ps, "backup.store", *b.Store)
	}
	if b.Secondary != nil {
		validateBlobStore(ps, "backup.secondary", *b.Secondary)
		needsRoot(ps, "backup.secondary", *b.Secondary)
	}
	if b.Enabled && len(b.SigningKey) < 16 {
		ps.add("backup.signing_key", "must be set (at least 16 bytes) when backup.enabled: it signs every manifest")
	}

	cc := c.ClaimCheck
	if cc.IP != "" && !validIP(cc.IP) {
		ps.mustBe("claim_check.ip", "an IPv4 or IPv6 literal", quote(cc.IP))
	}
	checkPort(ps, "claim_check.port", cc.Port)
	positive(ps, "claim_check.pack_max_bytes", cc.PackMaxBytes)
	nonNegative(ps, "claim_check.retention_days", cc.RetentionDays)
	positive(ps, "claim_check.sweep_interval_ms", cc.SweepIntervalMS)
	if cc.Store != nil {
		validateBlobStore(ps, "claim_check.store", *cc.Store)
		needsRoot(ps, "claim_check.store", *cc.Store)
		if cc.Store.KeyPrefix != "" {
			ps.add("claim_check.store.key_prefix", "must be empty: claim keys are never prefixed (every node's consumers redeem from one place)")
		}
	}
	seen := map[string]bool{}
	for i, tk := range cc.Auth.Tokens {
		path := fmt.Sprintf("claim_check.auth.tokens[%d]", i)
		if len(tk.Token) < 16 {
			ps.add(path+".token", "must be at least 16 bytes")
		} else if seen[tk.Token] {
			ps.add(path+".token", "repeats an earlier token")
		}
		seen[tk.Token] = true
		if len(tk.Scopes) == 0 {
			ps.add(path+".scopes", "must name at least one scope (%s)", ScopeClaimsRead)
		}
		for j, sc := range tk.Scopes {
			if sc != ScopeClaimsRead {
				ps.oneOf(fmt.Sprintf("%s.scopes[%d]", path, j), []string{ScopeClaimsRead}, sc)
			}
		}
		if len(tk.Tenants) == 0 {
			ps.add(path+".tenants", `must name at least one tenant ("*" = every tenant)`)
		}
		for j, t := range tk.Tenants {
			if t != "*" && !validID(t) {
				ps.mustBe(fmt.Sprintf("%s.tenants[%d]", path, j), `"*" or [A-Za-z0-9_-]{1,64}`, quote(t))
			}
		}
	}
	if len(cc.Auth.Tokens) == 0 && slices.Contains(c.Node.Roles, RoleClaimCheck) {
		ps.add("claim_check.auth.tokens", "the claim_check role needs at least one reader token (scopes [claims:read], tenants)")
	}
	if cc.RetentionDays > 0 && c.ClaimBlobStore().Type != BlobLocal {
		ps.add("claim_check.retention_days", "applies to a local store only; give the bucket a lifecycle rule on claims/")
	}
}

func validateBlobStore(ps *problems, path string, b BlobStore) {
	if !slices.Contains(blobTypes, b.Type) {
		ps.oneOf(join(path, "type"), blobTypes, b.Type)
	}
	if msg := keyPrefixProblem(b.KeyPrefix); msg != "" {
		ps.mustBe(join(path, "key_prefix"), msg, quote(b.KeyPrefix))
	}
	if b.Type == BlobS3 {
		if b.S3.Bucket == "" {
			ps.add(join(path, "s3.bucket"), "must be set when type is s3")
		}
		if (b.S3.AccessKeyID == "") != (b.S3.SecretAccessKey == "") {
			ps.add(join(path, "s3"), "access_key_id and secret_access_key go together (neither = the AWS credential chain)")
		}
	}
}

// needsRoot: a local store section of its own has no default directory (only storage.root has one).
func needsRoot(ps *problems, path string, b BlobStore) {
	if b.Type == BlobLocal && b.Root == "" {
		ps.add(join(path, "root"), "must be set when type is local")
	}
}

// keyPrefixProblem checks a key prefix: "" or `part/` repeated, each part of [A-Za-z0-9._-] and not "." or "..".
func keyPrefixProblem(p string) string {
	if p == "" {
		return ""
	}
	const want = `"" or parts of [A-Za-z0-9._-] each ending in "/" (e.g. "node-a/")`
	if !strings.HasSuffix(p, "/") {
		return want
	}
	for _, part := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		if part == "" || part == "." || part == ".." {
			return want
		}
		for i := 0; i < len(part); i++ {
			ch := part[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
				return want
			}
		}
	}
	return ""
}

// IntakeNodeID is this node's identity in the intake log: intake.node_id, else NodeID.
func (c *Config) IntakeNodeID() string {
	if c.Intake.NodeID != "" {
		return c.Intake.NodeID
	}
	return c.NodeID()
}

// NodeID is node.id, else intake.node_id, else the instance name.
func (c *Config) NodeID() string {
	if c.Node.ID != "" {
		return c.Node.ID
	}
	if c.Intake.NodeID != "" {
		return c.Intake.NodeID
	}
	return c.Instance
}
