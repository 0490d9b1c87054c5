package store

import (
	"errors"
	"sync/atomic"
	"testing"
)

// Inventory E.1: the store owner learns that a reopened store takes writes again from a probe. Probe is a
// synced write through the commit path's fault hook: it fails while commits fail, succeeds once they would, and
// leaves the store as it was (the store id it rewrites is unchanged).
func TestProbeFollowsTheCommitPath(t *testing.T) {
	var fail atomic.Bool
	dir := t.TempDir()
	db := openTest(t, dir, &Faults{BeforeCommit: func() error {
		if fail.Load() {
			return errors.New("IO error: No space left on device")
		}
		return nil
	}})
	id := db.StoreID()
	if err := db.Probe(); err != nil {
		t.Fatalf("Probe on a writable store: %v", err)
	}
	fail.Store(true)
	var we *WriteError
	if err := db.Probe(); !errors.As(err, &we) || we.Class != ClassNoSpace {
		t.Fatalf("Probe while writes fail = %v, want a no_space WriteError", err)
	}
	fail.Store(false)
	if err := db.Probe(); err != nil {
		t.Fatalf("Probe once writes succeed again: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Probe(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Probe on a closed store = %v, want ErrClosed", err)
	}
	db = openTest(t, dir, nil)
	if db.StoreID() != id {
		t.Fatalf("store id %q after probes, want %q", db.StoreID(), id)
	}
}
