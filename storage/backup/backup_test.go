package backup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/store"
)

// TestBackupRestoresEveryHookCommittedBeforeIt proves the round trip (design: "A node that starts on an empty
// data_dir restores the latest one before it opens the store"): a backup taken while the store runs restores
// into an empty dir as a store with the same id and every hook committed before the backup.
func TestBackupRestoresEveryHookCommittedBeforeIt(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "store"))
	before := commit(t, db, 200)
	primary := newMem("primary")
	r := newRunner(t, Target{Name: "primary", Store: primary})
	res, err := r.Run(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	after := commit(t, db, 10)

	m, err := Verify(ctx, primary, testKey)
	if err != nil || m.ID != res.Manifest.ID {
		t.Fatalf("Verify = %v, %v; want backup %s", m, err, res.Manifest.ID)
	}
	dir := filepath.Join(t.TempDir(), "b", "store")
	got, err := Restore(ctx, restoreOpts(dir, Target{Name: "primary", Store: primary}))
	if err != nil || got == nil || got.ID != res.Manifest.ID {
		t.Fatalf("Restore = %v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), MarkerName)); err != nil {
		t.Fatalf("the marker must stay until the restored store opened: %v", err)
	}
	ids := hookIDs(t, dir)
	for _, id := range before {
		if !ids[id] {
			t.Fatalf("hook %x committed before the backup is missing after the restore", id)
		}
	}
	for _, id := range after {
		if ids[id] {
			t.Fatalf("hook %x committed after the backup is in it", id)
		}
	}
	if err := Restored(dir); err != nil {
		t.Fatal(err)
	}
	restored := openStore(t, dir)
	if restored.StoreID() != db.StoreID() {
		t.Fatalf("restored store id %s, want %s", restored.StoreID(), db.StoreID())
	}
	t.Logf("backup %s: %d files, %d bytes uploaded; %d hooks restored", res.Manifest.ID, res.Files, res.Uploaded, len(ids))
}

// TestVerifyDetectsCorruptionAndABadSignature proves the read-back (design: "described by a manifest that
// backup.signing_key signs and that backup.verify_interval_ms reads back"): one flipped byte in an uploaded
// file fails the check of that file, and a manifest checked with another key fails the signature.
func TestVerifyDetectsCorruptionAndABadSignature(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "store"))
	commit(t, db, 50)
	primary := newMem("primary")
	if _, err := newRunner(t, Target{Name: "primary", Store: primary}).Run(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, primary, testKey); err != nil {
		t.Fatalf("Verify of an intact backup: %v", err)
	}
	if _, err := Verify(ctx, primary, []byte("another-key-of-16-bytes")); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("Verify with another key = %v, want ErrBadSignature", err)
	}

	sst := primary.keys(sharedPrefix)
	if len(sst) == 0 {
		t.Fatal("the backup has no shared file")
	}
	primary.mu.Lock()
	primary.objs[sst[0]][len(primary.objs[sst[0]])/2] ^= 0x01
	primary.mu.Unlock()
	_, err := Verify(ctx, primary, testKey)
	if !errors.Is(err, ErrFileMismatch) || !strings.Contains(err.Error(), sst[0]) {
		t.Fatalf("Verify after flipping a byte of %s = %v, want ErrFileMismatch naming it", sst[0], err)
	}

	// A manifest edited after signing (a file's digest replaced) fails the signature.
	id, _ := readLatest(ctx, primary)
	primary.mu.Lock()
	mk := manifestKey(id)
	primary.objs[mk] = []byte(strings.Replace(string(primary.objs[mk]), `"size": `, `"size": 1`, 1))
	primary.mu.Unlock()
	if _, err := Verify(ctx, primary, testKey); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("Verify of an edited manifest = %v, want ErrBadSignature", err)
	}
}

// TestPurgeKeepsKeepBackupsAndNoUnreferencedSharedFile proves the retention rule (inventory E.6: "Keep
// backup.keep; purge older + unreferenced shared files").
func TestPurgeKeepsKeepBackupsAndNoUnreferencedSharedFile(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "store"))
	primary := newMem("primary")
	r := newRunner(t, Target{Name: "primary", Store: primary})
	var last string
	for range 6 {
		commit(t, db, 30) // each checkpoint flushes: every run adds a table
		res, err := r.Run(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		last = res.Manifest.ID
	}
	ids, err := listIDs(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 {
		t.Fatalf("%d manifests kept, want keep=3: %v", len(ids), ids)
	}
	referenced := map[string]bool{}
	kept := map[string]bool{}
	for _, id := range ids {
		kept[id] = true
		m, err := readManifest(ctx, primary, id, testKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Files {
			referenced[f.Key] = true
			if _, ok := primary.objs[f.Key]; !ok {
				t.Fatalf("kept backup %s lists %s, which is gone", id, f.Key)
			}
		}
	}
	if !kept[last] {
		t.Fatalf("the newest backup %s was purged", last)
	}
	for _, k := range primary.keys(rootPrefix) {
		if k == latestKey {
			continue
		}
		if strings.HasPrefix(k, sharedPrefix) && !referenced[k] {
			t.Fatalf("shared file %s is referenced by no kept backup", k)
		}
		if id, _, _ := strings.Cut(strings.TrimPrefix(k, rootPrefix), "/"); id != "sst" && !kept[id] {
			t.Fatalf("object %s of a purged backup is left", k)
		}
	}
	if _, err := Verify(ctx, primary, testKey); err != nil {
		t.Fatal(err)
	}
	t.Logf("after 6 runs: %d manifests, %d shared files, %d objects", len(ids), len(primary.keys(sharedPrefix)), len(primary.keys("")))
}

// TestForeignStoreIsRefusedAndItsBackupUntouched proves the ownership rule (inventory E.6: foreign_backup "if
// LATEST belongs to another store id"): a second store backing up to the same location is refused, and the
// first store's backup stays byte for byte.
func TestForeignStoreIsRefusedAndItsBackupUntouched(t *testing.T) {
	ctx := context.Background()
	a := openStore(t, filepath.Join(t.TempDir(), "a"))
	b := openStore(t, filepath.Join(t.TempDir(), "b"))
	commit(t, a, 20)
	commit(t, b, 20)
	shared := newMem("shared")
	if _, err := newRunner(t, Target{Name: "primary", Store: shared}).Run(ctx, a); err != nil {
		t.Fatal(err)
	}
	before := shared.snapshot()
	_, err := newRunner(t, Target{Name: "primary", Store: shared}).Run(ctx, b)
	var fe *ForeignError
	if !errors.As(err, &fe) || !errors.Is(err, ErrForeignBackup) || fe.Theirs != a.StoreID() || fe.Ours != b.StoreID() {
		t.Fatalf("second store's backup = %v, want a ForeignError naming %s and %s", err, a.StoreID(), b.StoreID())
	}
	after := shared.snapshot()
	if len(after) != len(before) {
		t.Fatalf("the refused run changed the object count: %d → %d", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("the refused run changed %s", k)
		}
	}
	// A foreign secondary is refused and left as it is; the primary still takes the backup.
	own := newMem("own")
	res, err := newRunner(t, Target{Name: "primary", Store: own}, Target{Name: "secondary", Store: shared}).Run(ctx, b)
	if err != nil || !errors.Is(res.Failed["secondary"], ErrForeignBackup) {
		t.Fatalf("foreign secondary: %v, failed %v; want the primary's backup and the secondary refused", err, res)
	}
	if _, err := Verify(ctx, own, testKey); err != nil {
		t.Fatalf("primary beside a foreign secondary: %v", err)
	}
	if after := shared.snapshot(); len(after) != len(before) {
		t.Fatalf("the refused secondary changed: %d → %d objects", len(before), len(after))
	}
	// An unreachable secondary costs the primary nothing either.
	down := newMem("down")
	down.setFail(errors.New("dial tcp 127.0.0.1:9: connection refused"))
	res, err = newRunner(t, Target{Name: "primary", Store: newMem("p2")}, Target{Name: "secondary", Store: down}).Run(ctx, b)
	if err != nil || res.Failed["secondary"] == nil {
		t.Fatalf("unreachable secondary: %v, %+v; want a primary backup and the secondary named failed", err, res)
	}
}

// TestSecondaryOnlyRestore proves the fallback (design: "and to a second one, backup.secondary, if
// configured"; inventory: "restore can use it alone"): with the primary empty, or unreachable, the restore
// takes the secondary's backup.
func TestSecondaryOnlyRestore(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "store"))
	ids := commit(t, db, 40)
	primary, secondary := newMem("primary"), newMem("secondary")
	res, err := newRunner(t, Target{Name: "primary", Store: primary}, Target{Name: "secondary", Store: secondary}).Run(ctx, db)
	if err != nil || len(res.Failed) != 0 {
		t.Fatalf("run: %v %v", err, res)
	}
	f := func(name string, prepare func()) {
		t.Run(name, func(t *testing.T) {
			prepare()
			dir := filepath.Join(t.TempDir(), "store")
			m, err := Restore(ctx, restoreOpts(dir, Target{Name: "primary", Store: primary}, Target{Name: "secondary", Store: secondary}))
			if err != nil || m == nil || m.ID != res.Manifest.ID {
				t.Fatalf("Restore = %v, %v", m, err)
			}
			got := hookIDs(t, dir)
			for _, id := range ids {
				if !got[id] {
					t.Fatalf("hook %x missing after a secondary restore", id)
				}
			}
		})
	}
	f("primary empty", func() { primary.objs = map[string][]byte{} })
	f("primary unreachable", func() { primary.setFail(errors.New("dial tcp 127.0.0.1:9: connection refused")) })
}

// TestRestoreRefusesRatherThanStartEmpty proves the refusal (design: "or refuses to start when the backup
// location can't be read or a check fails, never 'starts empty'"), and that only "no backup anywhere" yields
// an empty store.
func TestRestoreRefusesRatherThanStartEmpty(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "store"))
	commit(t, db, 20)
	good := newMem("good")
	if _, err := newRunner(t, Target{Name: "primary", Store: good}).Run(ctx, db); err != nil {
		t.Fatal(err)
	}
	refuse := func(name string, targets []Target, key []byte) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			o := restoreOpts(dir, targets...)
			o.SigningKey = key
			m, err := Restore(ctx, o)
			var re *RestoreError
			if !errors.As(err, &re) || !errors.Is(err, ErrRestoreFailed) || re.Path != dir || m != nil {
				t.Fatalf("Restore = %v, %v; want a store_restore_failed refusal for %s", m, err, dir)
			}
			if held, _ := store.HoldsDatabase(dir); held {
				t.Fatal("a refused restore left a database in the store dir")
			}
			t.Logf("refusal: %v", err)
		})
	}
	down := newMem("down")
	down.setFail(errors.New("dial tcp 127.0.0.1:9: connection refused"))
	refuse("unreadable location", []Target{{Name: "primary", Store: down}}, testKey)
	refuse("unreadable primary, empty secondary", []Target{{Name: "primary", Store: down}, {Name: "secondary", Store: newMem("empty")}}, testKey)
	refuse("bad signature", []Target{{Name: "primary", Store: good}}, []byte("not-the-signing-key"))

	corrupt := newMem("corrupt")
	for k, v := range good.snapshot() {
		corrupt.objs[k] = []byte(v)
	}
	k := corrupt.keys(sharedPrefix)[0]
	corrupt.objs[k][0] ^= 0xff
	refuse("flipped byte", []Target{{Name: "primary", Store: corrupt}}, testKey)
	missing := newMem("missing")
	for k, v := range good.snapshot() {
		missing.objs[k] = []byte(v)
	}
	delete(missing.objs, missing.keys(sharedPrefix)[0])
	refuse("missing file", []Target{{Name: "primary", Store: missing}}, testKey)

	t.Run("no backup anywhere", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "store")
		m, err := Restore(ctx, restoreOpts(dir, Target{Name: "primary", Store: newMem("p")}, Target{Name: "secondary", Store: newMem("s")}))
		if err != nil || m != nil {
			t.Fatalf("Restore with no backup = %v, %v; want an empty start", m, err)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), MarkerName)); !os.IsNotExist(err) {
			t.Fatalf("marker left after an empty start: %v", err)
		}
	})
	t.Run("database present", func(t *testing.T) {
		m, err := Restore(ctx, restoreOpts(db.Dir(), Target{Name: "primary", Store: down}))
		if err != nil || m != nil {
			t.Fatalf("Restore over an existing store = %v, %v; want nothing done", m, err)
		}
	})
}

// TestCrashMidRestoreRestoresAgain proves the marker (inventory E.6: "RESTORE-IN-PROGRESS marker"): a restore
// cut short leaves files the next boot must not open; the next Restore discards them and restores whole.
func TestCrashMidRestoreRestoresAgain(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "store"))
	ids := commit(t, db, 20)
	primary := newMem("primary")
	if _, err := newRunner(t, Target{Name: "primary", Store: primary}).Run(ctx, db); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "store")
	if _, err := Restore(ctx, restoreOpts(dir, Target{Name: "primary", Store: primary})); err != nil {
		t.Fatal(err)
	}
	// The crash: the restored copy lost its CURRENT (as if cut before the rename completed) and the marker stays.
	if err := os.Remove(filepath.Join(dir, "CURRENT")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(store.Options{Dir: dir}); err == nil {
		t.Fatal("the damaged copy opened; the test's premise is wrong")
	}
	m, err := Restore(ctx, restoreOpts(dir, Target{Name: "primary", Store: primary}))
	if err != nil || m == nil {
		t.Fatalf("Restore after a cut-short restore = %v, %v", m, err)
	}
	got := hookIDs(t, dir)
	for _, id := range ids {
		if !got[id] {
			t.Fatalf("hook %x missing after the second restore", id)
		}
	}
	if err := Restored(dir); err != nil {
		t.Fatal(err)
	}
	// With the marker gone, a store that lost its CURRENT is damage: Restore leaves it for Open to refuse.
	if err := os.Remove(filepath.Join(dir, "CURRENT")); err != nil {
		t.Fatal(err)
	}
	if m, err := Restore(ctx, restoreOpts(dir, Target{Name: "primary", Store: primary})); err != nil || m != nil {
		t.Fatalf("Restore over a damaged store without a marker = %v, %v; want nothing done", m, err)
	}
}

// TestSecondWriterOfTheSameStoreIsRefused proves the prefix_shared rule (inventory E.6: "{:prefix_shared,
// latest} if another writer of the same store moved LATEST"): once a runner has written LATEST, a LATEST it did
// not write (a restored copy of the store backing up beside its original) stops it instead of interleaving.
func TestSecondWriterOfTheSameStoreIsRefused(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "store"))
	commit(t, db, 10)
	shared := newMem("shared")
	original := newRunner(t, Target{Name: "primary", Store: shared})
	if _, err := original.Run(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := original.Run(ctx, db); err != nil {
		t.Fatalf("a runner's second run over its own LATEST: %v", err)
	}
	copyRunner := newRunner(t, Target{Name: "primary", Store: shared})
	res, err := copyRunner.Run(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	_, err = original.Run(ctx, db)
	if !errors.Is(err, ErrPrefixShared) || !strings.Contains(err.Error(), res.Manifest.ID) {
		t.Fatalf("the original's run after another writer moved LATEST = %v, want prefix_shared naming %s", err, res.Manifest.ID)
	}
	if id, _ := readLatest(ctx, shared); id != res.Manifest.ID {
		t.Fatalf("LATEST = %s after the refused run, want %s", id, res.Manifest.ID)
	}
}
