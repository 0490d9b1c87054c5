package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/store"
)

// MarkerName is the file, beside the store dir, that says a restore started and has not been confirmed by an
// open of the restored store. Restore removes whatever such a restore left and starts again.
const MarkerName = "RESTORE-IN-PROGRESS"

// RestoreOptions configure Restore.
type RestoreOptions struct {
	Targets    []Target // tried in order: the primary, then the secondary
	SigningKey []byte
	StoreDir   string // <data_dir>/<instance>/store
	Log        zerolog.Logger
}

// Restore brings the latest backup into opts.StoreDir when it holds no database. It returns the restored
// manifest; nil with a nil error when nothing was restored (a database is there, or no location holds a
// backup). Every other outcome is a *RestoreError: the node must not start, since a backup may exist that it
// would otherwise start without.
//
// Targets are tried in order. A target with no LATEST, or one that cannot be read, or whose backup fails a
// check, sends the restore to the next; the store starts empty only when every target answered that it holds
// no backup.
//
// Once the restored copy is in place and reconciled, before anything commits to it, the caller calls Restored
// to drop the marker.
func Restore(ctx context.Context, opts RestoreOptions) (*Manifest, error) {
	dir := opts.StoreDir
	fail := func(err error) (*Manifest, error) { return nil, &RestoreError{Path: dir, Err: err} }
	marker := markerPath(dir)
	scratch := dir + ".restore"
	if _, err := os.Stat(marker); err == nil {
		opts.Log.Warn().Str("dir", dir).Msg("a restore was cut short; discarding what it wrote and restoring again")
		if err := os.RemoveAll(dir); err != nil {
			return fail(fmt.Errorf("cannot remove the partial restore: %w", err))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(fmt.Errorf("cannot stat %s: %w", marker, err))
	}
	held, err := store.HoldsDatabase(dir)
	if err != nil {
		return fail(err)
	}
	if held {
		return nil, nil
	}
	if len(opts.Targets) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return fail(err)
	}
	if err := writeMarker(marker); err != nil {
		return fail(err)
	}

	var errs []error
	for _, t := range opts.Targets {
		m, err := restoreFrom(ctx, t, opts.SigningKey, scratch)
		if errors.Is(err, ErrNoBackup) {
			opts.Log.Info().Str("target", t.Name).Str("location", t.Store.String()).Msg("no backup at this location")
			continue
		}
		if err != nil {
			opts.Log.Error().Err(err).Str("target", t.Name).Str("location", t.Store.String()).Msg("restore from this location failed")
			errs = append(errs, fmt.Errorf("%s (%s): %w", t.Name, t.Store, err))
			continue
		}
		// The scratch copy is whole (CURRENT last, synced): move it into place.
		if err := os.RemoveAll(dir); err != nil {
			return fail(err)
		}
		if err := os.Rename(scratch, dir); err != nil {
			return fail(fmt.Errorf("cannot move the restored store into place: %w", err))
		}
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return fail(err)
		}
		opts.Log.Warn().Str("target", t.Name).Str("location", t.Store.String()).Str("backup", m.ID).
			Str("store_id", m.StoreID).Int64("created_at_ms", m.CreatedAtMS).Int("files", len(m.Files)).
			Msg("store restored from backup: hooks acked after this backup's creation on the lost host are not in it")
		return m, nil
	}
	_ = os.RemoveAll(scratch)
	if len(errs) > 0 {
		return fail(errors.Join(errs...))
	}
	// Every location answered: no backup anywhere. Starting empty is right; the marker goes.
	if err := os.Remove(marker); err != nil {
		return fail(err)
	}
	return nil, nil
}

// Restored drops the marker once the restored copy is in place and reconciled; from then on the store may take
// commits, and a crash must never throw them away by restoring again.
func Restored(storeDir string) error {
	err := os.Remove(markerPath(storeDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup: cannot remove %s: %w", MarkerName, err)
	}
	if err == nil {
		return syncDir(filepath.Dir(storeDir))
	}
	return nil
}

func markerPath(storeDir string) string {
	return filepath.Join(filepath.Dir(storeDir), MarkerName)
}

// restoreFrom downloads t's latest backup into scratch, checking the signature and every file, CURRENT last.
func restoreFrom(ctx context.Context, t Target, key []byte, scratch string) (*Manifest, error) {
	id, err := readLatest(ctx, t.Store)
	if err != nil {
		return nil, err
	}
	m, err := readManifest(ctx, t.Store, id, key)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(scratch); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(scratch, 0o750); err != nil {
		return nil, err
	}
	var current *File
	for i := range m.Files {
		f := &m.Files[i]
		if f.Name == "CURRENT" {
			current = f
			continue
		}
		if err := download(ctx, t, *f, scratch); err != nil {
			return nil, err
		}
	}
	// RocksDB opens what CURRENT names: written after everything it names is synced, so a copy with CURRENT is
	// whole.
	if err := syncDir(scratch); err != nil {
		return nil, err
	}
	if err := download(ctx, t, *current, scratch); err != nil {
		return nil, err
	}
	if err := syncDir(scratch); err != nil {
		return nil, err
	}
	return m, nil
}

func download(ctx context.Context, t Target, f File, dir string) error {
	path := filepath.Join(dir, f.Name)
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if err := checkObject(ctx, t.Store, f, out); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		_ = out.Close()
		return fmt.Errorf("cannot sync %s: %w", path, err)
	}
	return out.Close()
}

func writeMarker(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cannot sync %s: %w", dir, err)
	}
	return nil
}
