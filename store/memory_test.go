package store

import (
	"testing"

	"github.com/linxGnu/grocksdb"
)

// The memory accounting reads RocksDB's own figures: the committed hooks sit in the memtables, the cache
// reports the capacity it was opened with, and a closed store answers zeros instead of touching freed handles.
func TestMemoryAccountsMemtablesAndCache(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	before := db.Memory()
	if before.BlockCacheCapacity != blockCacheBytes {
		t.Fatalf("block cache capacity %d, want %d", before.BlockCacheCapacity, blockCacheBytes)
	}
	if _, err := db.CommitHooks(makeRecords(t, 200, "acme")); err != nil {
		t.Fatal(err)
	}
	after := db.Memory()
	// 200 hooks of makeRecords' body size are in the memtables, not yet in any table.
	if after.Memtables <= before.Memtables {
		t.Fatalf("memtables %d after 200 commits, %d before: the commits are not accounted", after.Memtables, before.Memtables)
	}
	// A reader that took the memtable before its flush keeps it: accounted as pinned until it is done.
	if after.MemtablesPinned != 0 {
		t.Fatalf("pinned memtables %d with no reader", after.MemtablesPinned)
	}
	it := db.rdb.NewIteratorCF(db.ro, db.cfs[cfHooks])
	fo := grocksdb.NewDefaultFlushOptions()
	defer fo.Destroy()
	if err := db.rdb.FlushCF(db.cfs[cfHooks], fo); err != nil {
		t.Fatal(err)
	}
	if m := db.Memory(); m.MemtablesPinned == 0 {
		t.Fatalf("a flushed memtable held by an iterator is not accounted as pinned: %+v", m)
	}
	it.Close()
	if m := db.Memory(); m.MemtablesPinned != 0 {
		t.Fatalf("pinned memtables %d after the iterator closed", m.MemtablesPinned)
	}
	if after.BlockCachePinned > after.BlockCache {
		t.Fatalf("pinned %d above the cache usage %d", after.BlockCachePinned, after.BlockCache)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if m := db.Memory(); m != (Memory{}) {
		t.Fatalf("Memory after Close = %+v, want zeros", m)
	}
}
