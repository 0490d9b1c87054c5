package backup

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// File kinds: shared files (tables, blob files) are immutable and uploaded once for every backup that lists
// them; private files (MANIFEST, CURRENT, OPTIONS, WAL) change and are uploaded per backup.
const (
	KindShared  = "shared"
	KindPrivate = "private"
)

// Keys of the layout (see the package comment).
const (
	latestKey    = "backup/LATEST"
	sharedPrefix = "backup/sst/"
	rootPrefix   = "backup/"
	manifestName = "manifest.json"
)

// Manifest describes one backup. Its JSON is the object stored at backup/<id>/manifest.json.
type Manifest struct {
	Version     int    `json:"version"`
	ID          string `json:"id"`
	CreatedAtMS int64  `json:"created_at_ms"`
	StoreID     string `json:"store_id"`
	Writer      string `json:"writer"`
	Files       []File `json:"files"`
	// Signature is the hex HMAC-SHA256 of the canonical bytes: the manifest's JSON without this field.
	Signature string `json:"signature,omitempty"`
}

// File is one file of the checkpoint.
type File struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func manifestKey(id string) string { return rootPrefix + id + "/" + manifestName }

// fileKey is where a file of backup id goes.
func fileKey(id, name string) (kind, key string) {
	if strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") {
		return KindShared, sharedPrefix + name
	}
	return KindPrivate, rootPrefix + id + "/" + name
}

// canonical is what the signature covers: the manifest's JSON with no signature field. encoding/json writes
// struct fields in declaration order, so the bytes depend on the values only.
func (m *Manifest) canonical() ([]byte, error) {
	c := *m
	c.Signature = ""
	return json.Marshal(&c)
}

func sign(key, canonical []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}

// encode signs m with key and returns the bytes to store.
func (m *Manifest) encode(key []byte) ([]byte, error) {
	c, err := m.canonical()
	if err != nil {
		return nil, err
	}
	m.Signature = sign(key, c)
	return json.MarshalIndent(m, "", "  ")
}

// decodeManifest parses stored manifest bytes, checks the signature against key, then the layout: version 1,
// a ULID id equal to want (when given), every file a plain name under the key its kind dictates. Nothing of an
// unsigned or malformed manifest is returned.
func decodeManifest(b []byte, key []byte, want string) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadManifest, err)
	}
	c, err := m.canonical()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadManifest, err)
	}
	got, err := hex.DecodeString(m.Signature)
	if err != nil || !hmac.Equal(got, mustHex(sign(key, c))) {
		return nil, fmt.Errorf("%w (backup %q)", ErrBadSignature, m.ID)
	}
	if err := m.check(want); err != nil {
		return nil, err
	}
	return &m, nil
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s) // sign returns hex
	return b
}

func (m *Manifest) check(want string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: backup %q: %s", ErrBadManifest, m.ID, fmt.Sprintf(format, args...))
	}
	if m.Version != 1 {
		return bad("version %d, this build reads 1", m.Version)
	}
	if _, err := ulid.ParseStrict(m.ID); err != nil {
		return bad("id is not a ULID")
	}
	if want != "" && m.ID != want {
		return bad("LATEST names %q", want)
	}
	if m.StoreID == "" {
		return bad("no store_id")
	}
	seen := make(map[string]bool, len(m.Files))
	current := false
	for _, f := range m.Files {
		if strings.Contains(f.Name, "/") || !blob.ValidKey(f.Name) || seen[f.Name] {
			return bad("file name %q invalid or repeated", f.Name)
		}
		seen[f.Name] = true
		kind, key := fileKey(m.ID, f.Name)
		if f.Kind != kind || f.Key != key {
			return bad("file %q: kind %q key %q, want %q %q", f.Name, f.Kind, f.Key, kind, key)
		}
		if f.Size < 0 || len(f.SHA256) != 64 {
			return bad("file %q: size %d sha256 %q", f.Name, f.Size, f.SHA256)
		}
		current = current || f.Name == "CURRENT"
	}
	if !current {
		return bad("no CURRENT")
	}
	return nil
}
