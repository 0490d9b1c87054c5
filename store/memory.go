package store

// Memory is what the store holds in memory outside the Go heap, in bytes, as RocksDB accounts it.
type Memory struct {
	// BlockCache is the block cache in use: data blocks read back, and every table's index and filter
	// blocks (they are charged to the cache, so it also bounds what grows with the number of tables).
	BlockCache uint64
	// BlockCachePinned is the part of BlockCache that cannot be evicted (L0's index and filter blocks,
	// blocks held by live iterators).
	BlockCachePinned uint64
	// BlockCacheCapacity is the cache's bound; BlockCache may pass it only by what is pinned.
	BlockCacheCapacity uint64
	// Memtables is the size of every column family's active and immutable memtables.
	Memtables uint64
	// MemtablesPinned is what flushed memtables still hold because a reader (an iterator, or a read's
	// version) took them before the flush: freed when it is done, so a figure that keeps rising names a reader
	// that is never done.
	MemtablesPinned uint64
	// TableReaders is what the open tables hold outside the block cache (their readers' own state).
	TableReaders uint64
}

// Memory reads the store's memory accounting; zero after Close. The properties are per column family, so
// the memtables and table readers are summed over all of them; the block cache is shared.
func (db *DB) Memory() Memory {
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return Memory{}
	}
	m := Memory{BlockCache: db.cache.GetUsage(), BlockCachePinned: db.cache.GetPinnedUsage(),
		BlockCacheCapacity: db.cache.GetCapacity()}
	for _, cf := range db.cfs {
		cur, ok := db.rdb.GetIntPropertyCF("rocksdb.cur-size-all-mem-tables", cf)
		if ok {
			m.Memtables += cur
		}
		if all, ok := db.rdb.GetIntPropertyCF("rocksdb.size-all-mem-tables", cf); ok && all > cur {
			m.MemtablesPinned += all - cur
		}
		if v, ok := db.rdb.GetIntPropertyCF("rocksdb.estimate-table-readers-mem", cf); ok {
			m.TableReaders += v
		}
	}
	return m
}

// Estimates are RocksDB's estimates of the store's size (GET /v1/wal): cheap, not exact.
type Estimates struct {
	Hooks      uint64 // keys of the hooks column family (memtables and tables)
	Deliveries uint64 // keys of the deliveries column family (delivery rows and delivered records)
	DiskBytes  uint64 // the table files of every column family, live or awaiting deletion
}

// Estimate reads the estimates from the store's properties (zero once it is closed).
func (db *DB) Estimate() Estimates {
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return Estimates{}
	}
	var e Estimates
	e.Hooks, _ = db.rdb.GetIntPropertyCF("rocksdb.estimate-num-keys", db.cfs[cfHooks])
	e.Deliveries, _ = db.rdb.GetIntPropertyCF("rocksdb.estimate-num-keys", db.cfs[cfDeliveries])
	for _, cf := range db.cfs {
		if v, ok := db.rdb.GetIntPropertyCF("rocksdb.total-sst-files-size", cf); ok {
			e.DiskBytes += v
		}
	}
	return e
}
