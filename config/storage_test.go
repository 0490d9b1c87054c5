package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Storage, backup and claim-check keys: each bad value is refused with its key path, and a secret is never
// echoed in the problem.
func TestStorageKeysRefused(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, path string
	}{
		{"blob type", "storage: {type: gcs}", "storage.type"},
		{"s3 without bucket", "storage: {type: s3}", "storage.s3.bucket"},
		{"half static keys", "storage: {type: s3, s3: {bucket: b, access_key_id: AKIA}}", "storage.s3"},
		{"prefix without slash", "storage: {key_prefix: node-a}", "storage.key_prefix"},
		{"prefix escapes", "storage: {key_prefix: ../x/}", "storage.key_prefix"},
		{"roll bytes", "storage: {roll_bytes: 0}", "storage.roll_bytes"},
		{"pace zero", "storage: {pace_percent: 0}", "storage.pace_percent"},
		{"pace above 100", "storage: {pace_percent: 101}", "storage.pace_percent"},
		{"lag segments", "storage: {max_lag_segments: 0}", "storage.max_lag_segments"},
		{"lag ms", "storage: {max_lag_ms: -1}", "storage.max_lag_ms"},
		{"codec", "storage: {codec: zstd}", "storage.codec"},
		{"archive above catalogue", "storage: {catalogue_retention_days: 7}\narchive: {retention_days: 8}", "archive.retention_days"},
		{"backup without key", "backup: {enabled: true}", "backup.signing_key"},
		{"backup keep", "backup: {keep: 0}", "backup.keep"},
		{"secondary type", "backup: {secondary: {type: ftp}}", "backup.secondary.type"},
		{"claim retention on s3", "claim_check: {retention_days: 3, store: {type: s3, s3: {bucket: b}}}", "claim_check.retention_days"},
		{"node id", "node: {id: 'a b'}", "node.id"},
		{"claim store prefixed", "claim_check: {store: {type: local, root: /c, key_prefix: a/}}", "claim_check.store.key_prefix"},
		{"claim store without root", "claim_check: {store: {type: local}}", "claim_check.store.root"},
		{"backup store without root", "backup: {store: {type: local}}", "backup.store.root"},
		{"claim role without tokens", "node: {roles: [edge, claim_check]}", "claim_check.auth.tokens"},
		{"claim token short", "claim_check: {auth: {tokens: [{token: short, scopes: [claims:read], tenants: [t]}]}}", "claim_check.auth.tokens[0].token"},
		{"claim token scope", "claim_check: {auth: {tokens: [{token: 0123456789abcdef, scopes: [claims:write], tenants: [t]}]}}", "claim_check.auth.tokens[0].scopes[0]"},
		{"claim token no tenants", "claim_check: {auth: {tokens: [{token: 0123456789abcdef, scopes: [claims:read]}]}}", "claim_check.auth.tokens[0].tenants"},
		{"claim token bad tenant", "claim_check: {auth: {tokens: [{token: 0123456789abcdef, scopes: [claims:read], tenants: ['../x']}]}}", "claim_check.auth.tokens[0].tenants[0]"},
		{"claim token repeated", "claim_check: {auth: {tokens: [{token: 0123456789abcdef, scopes: [claims:read], tenants: [a]}, {token: 0123456789abcdef, scopes: [claims:read], tenants: [b]}]}}", "claim_check.auth.tokens[1].token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), envOf(nil))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse: %v, want a config error", err)
			}
			if !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("problem does not name %s: %v", tc.path, err)
			}
		})
	}
	_, err := Parse([]byte("storage: {type: s3, s3: {bucket: b, secret_access_key: hunter2-secret}}"), envOf(nil))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("half static keys: %v (must be refused without echoing the secret)", err)
	}
}

func TestStorageDefaultsResolve(t *testing.T) {
	c, err := Parse([]byte("node: {data_dir: /d}\ninstance: i1\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.StorageBlobStore(); got.Type != BlobLocal || got.Root != "/d/i1/segments" {
		t.Fatalf("storage blob store = %+v, want local at /d/i1/segments", got)
	}
	if c.NodeID() != "i1" {
		t.Fatalf("node id = %q, want the instance name", c.NodeID())
	}
	c, err = Parse([]byte("storage: {key_prefix: n1/}\nbackup: {enabled: true, signing_key: 0123456789abcdef}\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.BackupBlobStore().KeyPrefix != "n1/" || c.ClaimBlobStore().KeyPrefix != "" {
		t.Fatalf("backup store %+v (want the storage prefix), claim store %+v (want none)", c.BackupBlobStore(), c.ClaimBlobStore())
	}
}

// print-config never shows a claim gateway token, and a refused token is not echoed.
func TestClaimTokensRedacted(t *testing.T) {
	c, err := Parse([]byte("claim_check: {auth: {tokens: [{token: tok-0123456789-secret, scopes: [claims:read], tenants: ['*']}]}}"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(c.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "tok-0123456789-secret") || !strings.Contains(string(out), "claims:read") {
		t.Fatalf("print-config view: %s", out)
	}
	_, err = Parse([]byte("claim_check: {auth: {tokens: [{token: short-secret, scopes: [claims:read], tenants: [t]}]}}"), envOf(nil))
	if err == nil || strings.Contains(err.Error(), "short-secret") {
		t.Fatalf("short token: %v (must be refused without echoing it)", err)
	}
}
