package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// Target is one location backups go to.
type Target struct {
	Name  string // primary | secondary: the label of ankusa_backup_verify_failed_total{target}
	Store blob.Store
}

// Source is the store being backed up (*store.DB).
type Source interface {
	// Checkpoint writes an openable copy of the store into dir, which must not exist yet.
	Checkpoint(dir string) error
	StoreID() string
}

// Options configure a Runner.
type Options struct {
	Targets    []Target // the primary first; a secondary after it
	SigningKey []byte   // backup.signing_key
	Keep       int      // backup.keep
	Writer     string   // node id, recorded in every manifest
	// WorkDir holds the checkpoint while it is uploaded; on the store's filesystem (a checkpoint hard-links the
	// store's tables), e.g. <data_dir>/<instance>/backup-work. Its contents are removed before every run.
	WorkDir string
	Log     zerolog.Logger
	Now     func() time.Time // nil: time.Now
}

// Result is what one run did.
type Result struct {
	Manifest *Manifest
	Files    int   // files in the backup
	Uploaded int64 // bytes uploaded to the primary (shared files already there are not)
	// Failed names the targets the backup did not reach, with why; the run is whole when it is empty.
	Failed map[string]error
}

// Runner takes and uploads backups, one at a time: its methods must not run concurrently.
type Runner struct {
	o Options
	// digests remembers the sha256 of shared files by name and size: they are immutable, so a table is read
	// once for its digest, not once per run.
	digests map[string]digest
	// wrote holds, per target, the ids this runner last wrote as LATEST: the last confirmed and the last
	// attempted (a put that failed may have landed). A LATEST of our store that is neither was moved by another
	// writer of the same store.
	wrote map[string][2]string
}

type digest struct {
	size int64
	sum  string
}

// NewRunner returns a runner for o.
func NewRunner(o Options) *Runner {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Keep < 1 {
		o.Keep = 1
	}
	return &Runner{o: o, digests: make(map[string]digest), wrote: make(map[string][2]string)}
}

// Run takes one backup of src and uploads it to every target. It refuses a target whose LATEST belongs to
// another store (a *ForeignError) or was moved by another writer (ErrPrefixShared), and writes nothing there.
// The error is nil when the first target (the primary) took the backup; Result.Failed names any other target
// that did not (refused, unreachable or failing): a secondary's trouble never costs the primary its backup.
func (r *Runner) Run(ctx context.Context, src Source) (*Result, error) {
	ours := src.StoreID()
	failed := map[string]error{}
	for i, t := range r.o.Targets {
		if err := r.checkOwner(ctx, t, ours); err != nil {
			if i == 0 {
				return nil, err
			}
			failed[t.Name] = err
		}
	}
	now := r.o.Now()
	id, err := ulid.New(ulid.Timestamp(now), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("backup: cannot make an id: %w", err)
	}
	if err := os.RemoveAll(r.o.WorkDir); err != nil {
		return nil, fmt.Errorf("backup: cannot clear %s: %w", r.o.WorkDir, err)
	}
	if err := os.MkdirAll(r.o.WorkDir, 0o750); err != nil {
		return nil, fmt.Errorf("backup: cannot create %s: %w", r.o.WorkDir, err)
	}
	dir := filepath.Join(r.o.WorkDir, id.String())
	defer os.RemoveAll(dir)
	if err := src.Checkpoint(dir); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	m := &Manifest{Version: 1, ID: id.String(), CreatedAtMS: now.UnixMilli(), StoreID: ours, Writer: r.o.Writer}
	if err := r.describe(dir, m); err != nil {
		return nil, err
	}
	body, err := m.encode(r.o.SigningKey)
	if err != nil {
		return nil, fmt.Errorf("backup: cannot encode the manifest: %w", err)
	}
	res := &Result{Manifest: m, Files: len(m.Files), Failed: failed}
	for i, t := range r.o.Targets {
		if failed[t.Name] != nil {
			continue
		}
		n, err := r.upload(ctx, t, dir, m, body)
		if err != nil {
			err = fmt.Errorf("backup %s to %s (%s): %w", m.ID, t.Name, t.Store, err)
			if i == 0 {
				return nil, err
			}
			res.Failed[t.Name] = err
			continue
		}
		if i == 0 {
			res.Uploaded = n
		}
		if err := r.purge(ctx, t, m.ID); err != nil {
			// The backup is whole; old ones linger until the next purge succeeds.
			r.o.Log.Warn().Err(err).Str("target", t.Name).Msg("backup purge failed; older backups kept until the next run")
		}
	}
	return res, nil
}

// checkOwner refuses a target whose LATEST manifest names another store. The store id is read without the
// signature check: another store may sign with another key, and refusing is the safe side either way.
func (r *Runner) checkOwner(ctx context.Context, t Target, ours string) error {
	id, err := readLatest(ctx, t.Store)
	if errors.Is(err, ErrNoBackup) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup: %s (%s): %w", t.Name, t.Store, err)
	}
	b, err := readAll(ctx, t.Store, manifestKey(id))
	if err != nil {
		return fmt.Errorf("backup: %s (%s): LATEST names %s: %w", t.Name, t.Store, id, err)
	}
	var head struct {
		StoreID string `json:"store_id"`
	}
	if err := json.Unmarshal(b, &head); err != nil || head.StoreID == "" {
		return fmt.Errorf("backup: %s (%s): %w: LATEST's manifest %s names no store", t.Name, t.Store, ErrBadManifest, id)
	}
	if head.StoreID != ours {
		return &ForeignError{Target: t.Name, Theirs: head.StoreID, Ours: ours}
	}
	if w := r.wrote[t.Name]; w[0] != "" && id != w[0] && id != w[1] {
		return fmt.Errorf("%w: %s (%s) LATEST is %s, this node last wrote %s: another node runs store %s and backs up here",
			ErrPrefixShared, t.Name, t.Store, id, w[1], ours)
	}
	return nil
}

// describe lists the checkpoint's files with their sizes and digests.
func (r *Runner) describe(dir string, m *Manifest) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("backup: cannot list the checkpoint: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("backup: checkpoint entry %s is not a regular file", e.Name())
		}
		name := e.Name()
		if !blob.ValidKey(name) {
			return fmt.Errorf("backup: checkpoint file name %q cannot be a key", name)
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		kind, key := fileKey(m.ID, name)
		d, ok := r.digests[name]
		if !ok || d.size != info.Size() || kind != KindShared {
			sum, size, err := hashFile(filepath.Join(dir, name))
			if err != nil {
				return err
			}
			d = digest{size: size, sum: sum}
			if kind == KindShared {
				r.digests[name] = d
			}
		}
		m.Files = append(m.Files, File{Name: name, Kind: kind, Key: key, Size: d.size, SHA256: d.sum})
	}
	// Forget tables that left the store (compacted away): the cache stays the size of the store.
	for name := range r.digests {
		if !slices.ContainsFunc(m.Files, func(f File) bool { return f.Name == name }) {
			delete(r.digests, name)
		}
	}
	return nil
}

// upload writes the backup's files, then its manifest, then LATEST, and returns the bytes it sent. A shared
// file is skipped when a manifest still listed at the target names it with the same size and digest.
func (r *Runner) upload(ctx context.Context, t Target, dir string, m *Manifest, body []byte) (int64, error) {
	have, err := r.sharedListed(ctx, t)
	if err != nil {
		return 0, err
	}
	var sent int64
	for _, f := range m.Files {
		if f.Kind == KindShared && have[f.Key] == (digest{size: f.Size, sum: f.SHA256}) {
			continue
		}
		if err := putFile(ctx, t.Store, f.Key, filepath.Join(dir, f.Name), f.Size); err != nil {
			return sent, err
		}
		sent += f.Size
	}
	if err := t.Store.Put(ctx, manifestKey(m.ID), bytes.NewReader(body), int64(len(body))); err != nil {
		return sent, fmt.Errorf("cannot write the manifest: %w", err)
	}
	w := r.wrote[t.Name]
	w[1] = m.ID
	r.wrote[t.Name] = w
	if err := t.Store.Put(ctx, latestKey, strings.NewReader(m.ID), int64(len(m.ID))); err != nil {
		return sent, fmt.Errorf("cannot write LATEST: %w", err)
	}
	r.wrote[t.Name] = [2]string{m.ID, m.ID}
	return sent + int64(len(body)+len(m.ID)), nil
}

// sharedListed maps every shared key that a signed manifest at the target lists to its size and digest.
func (r *Runner) sharedListed(ctx context.Context, t Target) (map[string]digest, error) {
	ids, err := listIDs(ctx, t.Store)
	if err != nil {
		return nil, err
	}
	have := make(map[string]digest)
	for _, id := range ids {
		m, err := readManifest(ctx, t.Store, id, r.o.SigningKey)
		if err != nil {
			continue // an unreadable old manifest vouches for nothing: its files are uploaded again
		}
		for _, f := range m.Files {
			if f.Kind == KindShared {
				have[f.Key] = digest{size: f.Size, sum: f.SHA256}
			}
		}
	}
	return have, nil
}

// purge keeps the Keep newest backups (and always latest) and deletes every other backup's objects and every
// shared file none of the kept manifests lists.
func (r *Runner) purge(ctx context.Context, t Target, latest string) error {
	ids, err := listIDs(ctx, t.Store)
	if err != nil {
		return err
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	kept := map[string]bool{latest: true}
	for _, id := range ids {
		if len(kept) >= r.o.Keep {
			break
		}
		kept[id] = true
	}
	referenced := make(map[string]bool)
	for id := range kept {
		m, err := readManifest(ctx, t.Store, id, r.o.SigningKey)
		if err != nil {
			// Without a kept manifest's list, no shared file can be known unreferenced.
			return fmt.Errorf("cannot read kept backup %s: %w", id, err)
		}
		for _, f := range m.Files {
			referenced[f.Key] = true
		}
	}
	var doomed []string
	err = t.Store.List(ctx, rootPrefix, func(o blob.Object) error {
		rest := strings.TrimPrefix(o.Key, rootPrefix)
		switch {
		case o.Key == latestKey:
		case strings.HasPrefix(o.Key, sharedPrefix):
			if !referenced[o.Key] {
				doomed = append(doomed, o.Key)
			}
		default:
			id, _, ok := strings.Cut(rest, "/")
			if ok && !kept[id] {
				doomed = append(doomed, o.Key)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot list backups: %w", err)
	}
	// Manifests first: a purge cut short leaves files no manifest lists (deleted next time), never a manifest
	// whose files are gone.
	slices.SortStableFunc(doomed, func(a, b string) int {
		am, bm := strings.HasSuffix(a, "/"+manifestName), strings.HasSuffix(b, "/"+manifestName)
		switch {
		case am && !bm:
			return -1
		case bm && !am:
			return 1
		}
		return 0
	})
	for _, k := range doomed {
		if err := t.Store.Delete(ctx, k); err != nil {
			return fmt.Errorf("cannot delete %s: %w", k, err)
		}
	}
	return nil
}

// listIDs returns the ids of every backup with a manifest at the store.
func listIDs(ctx context.Context, s blob.Store) ([]string, error) {
	var ids []string
	err := s.List(ctx, rootPrefix, func(o blob.Object) error {
		rest := strings.TrimPrefix(o.Key, rootPrefix)
		if id, name, ok := strings.Cut(rest, "/"); ok && name == manifestName && id != "sst" {
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list backups: %w", err)
	}
	return ids, nil
}

// readLatest returns the id LATEST names, or ErrNoBackup.
func readLatest(ctx context.Context, s blob.Store) (string, error) {
	b, err := readAll(ctx, s, latestKey)
	if errors.Is(err, blob.ErrNotFound) {
		return "", ErrNoBackup
	}
	if err != nil {
		return "", fmt.Errorf("cannot read LATEST: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if _, err := ulid.ParseStrict(id); err != nil {
		return "", fmt.Errorf("%w: LATEST holds %q, not a backup id", ErrBadManifest, truncate(id, 40))
	}
	return id, nil
}

// readManifest reads and checks backup id's manifest.
func readManifest(ctx context.Context, s blob.Store, id string, key []byte) (*Manifest, error) {
	b, err := readAll(ctx, s, manifestKey(id))
	if err != nil {
		return nil, fmt.Errorf("cannot read manifest of backup %s: %w", id, err)
	}
	return decodeManifest(b, key, id)
}

// maxManifestBytes bounds what a manifest read may allocate: a store holds a few hundred files at most.
const maxManifestBytes = 16 << 20

func readAll(ctx context.Context, s blob.Store, key string) ([]byte, error) {
	rc, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", key, err)
	}
	if len(b) > maxManifestBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", key, maxManifestBytes)
	}
	return b, nil
}

func putFile(ctx context.Context, s blob.Store, key, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", path, err)
	}
	defer f.Close()
	if err := s.Put(ctx, key, io.LimitReader(f, size), size); err != nil {
		return fmt.Errorf("cannot upload %s: %w", key, err)
	}
	return nil
}

func hashFile(path string) (sum string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("backup: cannot open %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	size, err = io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("backup: cannot read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
