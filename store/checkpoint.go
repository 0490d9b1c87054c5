package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Checkpoint writes an openable copy of the store into dir, which must not exist yet (its parent must, on the
// same filesystem as the store so table files are hard links, not copies). It is safe while commits go on:
// RocksDB flushes the memtables first (log_size_for_flush 0), then links every live table and blob file and
// copies MANIFEST, CURRENT, OPTIONS and the live WAL up to their sizes at that moment, so the copy holds every
// commit that returned before Checkpoint was called.
func (db *DB) Checkpoint(dir string) error {
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	cp, err := db.rdb.NewCheckpoint()
	if err != nil {
		return fmt.Errorf("store: cannot start a checkpoint: %w", err)
	}
	defer cp.Destroy()
	if err := cp.CreateCheckpoint(dir, 0); err != nil {
		return fmt.Errorf("store: cannot write checkpoint %s: %w", dir, err)
	}
	return nil
}

// HoldsDatabase tells whether dir holds a database (or the remains of one): a CURRENT, a MANIFEST, a table, a
// blob or a WAL file. A missing directory holds none. A restore runs only where this is false, so a store that
// lost its CURRENT is refused by Open rather than overwritten by a backup.
func HoldsDatabase(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: cannot list %s: %w", dir, err)
	}
	for _, e := range entries {
		if isDatabaseFile(e.Name()) {
			return true, nil
		}
	}
	return false, nil
}

// isDatabaseFile names the files whose presence means a database was (being) created here.
func isDatabaseFile(n string) bool {
	return n == "CURRENT" || strings.HasPrefix(n, "MANIFEST-") || strings.HasSuffix(n, ".sst") ||
		strings.HasSuffix(n, ".log") || strings.HasSuffix(n, ".blob")
}

// AdvanceNextSeq moves m:next_seq forward to next (never back), synced, so no later commit reuses a seq below
// it. A store restored from a backup calls it with a seq past the highest its lost predecessor archived after
// that backup: those seqs name hooks in archive segments the restored store never saw.
func (db *DB) AdvanceNextSeq(next uint64) error {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	if next <= db.nextSeq.Load() {
		return nil
	}
	if err := db.rdb.PutCF(db.wo, db.cfs[cfDefault], []byte(metaNextSeq), binary.BigEndian.AppendUint64(nil, next)); err != nil {
		return &WriteError{Class: classify(err), Err: err}
	}
	db.nextSeq.Store(next)
	return nil
}
