package store

import (
	"bytes"
	"strings"
	"testing"

	"github.com/linxGnu/grocksdb"
	"github.com/rs/zerolog"
)

// The sync writer's thread writes through the C handles it is given: what it wrote is read back through
// grocksdb, and a write RocksDB refuses comes back as that write's error, with the writer still usable after.
func TestSyncWriterWritesThroughTheHandles(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	w, err := newSyncWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()

	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	for i := range 3 {
		wb.Clear()
		wb.PutCF(db.cfs[cfDefault], []byte("syncwrite-test"), []byte{byte('a' + i)})
		if err := w.write(db.rdb, db.wo, wb); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		got, err := readBack(db)
		if err != nil {
			t.Fatal(err)
		}
		if want := []byte{byte('a' + i)}; !bytes.Equal(got, want) {
			t.Fatalf("after write %d read %q, want %q", i, got, want)
		}
	}

	// RocksDB refuses a synced write without its WAL.
	bad := grocksdb.NewDefaultWriteOptions()
	defer bad.Destroy()
	bad.SetSync(true)
	bad.DisableWAL(true)
	wb.Clear()
	wb.PutCF(db.cfs[cfDefault], []byte("syncwrite-test"), []byte("refused"))
	if err := w.write(db.rdb, bad, wb); err == nil || !strings.Contains(strings.ToLower(err.Error()), "wal") {
		t.Fatalf("a synced write without the WAL: err %v, want RocksDB's refusal", err)
	}
	wb.Clear()
	wb.PutCF(db.cfs[cfDefault], []byte("syncwrite-test"), []byte("after"))
	if err := w.write(db.rdb, db.wo, wb); err != nil {
		t.Fatalf("the write after a refused one: %v", err)
	}
	got, err := readBack(db)
	if err != nil || string(got) != "after" {
		t.Fatalf("read %q, %v after the refused write; want \"after\"", got, err)
	}
}

// The writer's thread ends at close, also with no write ever made, and a store's reopen gets a new one.
func TestSyncWriterCloses(t *testing.T) {
	w, err := newSyncWriter()
	if err != nil {
		t.Fatal(err)
	}
	w.close()

	dir := t.TempDir()
	for range 3 {
		db, err := Open(Options{Dir: dir, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.CommitHooks(makeRecords(t, 2, "acme")); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func readBack(db *DB) ([]byte, error) {
	v, err := db.rdb.GetCF(db.ro, db.cfs[cfDefault], []byte("syncwrite-test"))
	if err != nil {
		return nil, err
	}
	defer v.Free()
	return bytes.Clone(v.Data()), nil
}
