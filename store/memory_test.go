package store

import (
	"crypto/rand"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

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

// incompressibleRecords is n hooks of 64 KiB of random bytes for tenant acme, to be flushed byte for byte.
func incompressibleRecords(n int) []*Record {
	recs := make([]*Record, n)
	for i := range recs {
		h := Hook{ID: newID(), ReceivedAt: time.Now().UnixMilli(), Tenant: "acme", Source: "src",
			ContentType: "application/octet-stream", Body: make([]byte, 64<<10)}
		_, _ = rand.Read(h.Body)
		recs[i] = &Record{ID: h.ID, Tenant: "acme", Source: "src", ReceivedAt: h.ReceivedAt, Size: uint32(len(h.Body)),
			Value: AppendHook(nil, &h), Sinks: []SinkBinding{{Type: "log"}}}
	}
	return recs
}

// Options.BackgroundWriteBytesPerSec paces the flushes: 1.5 MiB of incompressible hooks paced at 1 MiB/s take
// more than a second to flush (unpaced, this box flushes them in a few milliseconds), and the paced store
// reopens and reads them back.
func TestBackgroundWritesArePaced(t *testing.T) {
	dir := t.TempDir()
	db := openWith(t, Options{Dir: dir, BackgroundWriteBytesPerSec: 1 << 20})
	recs := incompressibleRecords(24)
	if _, err := db.CommitHooks(recs); err != nil {
		t.Fatal(err)
	}
	fo := grocksdb.NewDefaultFlushOptions()
	defer fo.Destroy()
	start := time.Now()
	if err := db.rdb.FlushCF(db.cfs[cfHooks], fo); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("1.5 MiB flushed in %v at 1 MiB/s: the flush is not paced", took)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openWith(t, Options{Dir: dir, BackgroundWriteBytesPerSec: 1 << 20})
	if _, err := db.GetHook(recs[len(recs)-1].Outcome.Seq); err != nil {
		t.Fatalf("the last paced hook cannot be read back after a reopen: %v", err)
	}
}

// Options.DeleteBytesPerSec reaches RocksDB (read back through the C handle pacedelete.go takes from
// grocksdb's Options) and paces the deletion of an obsolete WAL file: once every column family is flushed,
// the 6 MiB WAL the commits went to is moved to the trash and freed 1 MiB at a time at 1 MiB/s, where the
// unpaced store unlinks it at once. A reopen, even without pacing, deletes the trash a closed store left behind.
func TestPacedDeletesReachRocksDB(t *testing.T) {
	walFiles := func(dir string) (logs, trash []string) {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			switch n := e.Name(); {
			case strings.HasSuffix(n, ".trash"):
				trash = append(trash, n)
			case strings.HasSuffix(n, ".log"):
				logs = append(logs, n)
			}
		}
		return logs, trash
	}
	flushAll := func(db *DB) (before []string) {
		t.Helper()
		if _, err := db.CommitHooks(incompressibleRecords(96)); err != nil {
			t.Fatal(err)
		}
		before, _ = walFiles(db.dir)
		fo := grocksdb.NewDefaultFlushOptions()
		defer fo.Destroy()
		for _, cf := range db.cfs {
			if err := db.rdb.FlushCF(cf, fo); err != nil {
				t.Fatal(err)
			}
		}
		return before
	}

	unpaced := openWith(t, Options{Dir: t.TempDir()})
	if r := pacedDeleteRate(unpaced.opts); r != 0 {
		t.Fatalf("unpaced store has a delete rate of %d", r)
	}
	before := flushAll(unpaced)
	if logs, trash := walFiles(unpaced.dir); len(trash) != 0 || slices.Contains(logs, before[len(before)-1]) {
		t.Fatalf("unpaced: WAL files %v and trash %v after every column family was flushed, want %s gone", logs, trash, before[len(before)-1])
	}
	if b := unpaced.TrashBytes(); b != 0 {
		t.Fatalf("unpaced store reports %d bytes of trash", b)
	}

	dir := t.TempDir()
	paced := openWith(t, Options{Dir: dir, DeleteBytesPerSec: 1 << 20})
	if r := pacedDeleteRate(paced.opts); r != 1<<20 {
		t.Fatalf("delete rate read back from RocksDB = %d, want %d", r, 1<<20)
	}
	before = flushAll(paced)
	if b := paced.TrashBytes(); b == 0 {
		t.Fatal("paced store reports no trash right after its WAL went to the trash")
	}
	logs, trash := walFiles(dir)
	if slices.Contains(logs, before[len(before)-1]) || !slices.Contains(trash, before[len(before)-1]+".trash") {
		t.Fatalf("paced: WAL files %v and trash %v after every column family was flushed, want %s in the trash", logs, trash, before[len(before)-1])
	}
	if err := paced.Close(); err != nil {
		t.Fatal(err)
	}
	// Unpaced: turning the pacing off strands no file a paced store left in the trash.
	reopened := openWith(t, Options{Dir: dir})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, trash = walFiles(reopened.dir); len(trash) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trash %v still there 10 s after a reopen", trash)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
