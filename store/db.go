package store

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/linxGnu/grocksdb"
	"github.com/rs/zerolog"
)

// Column families, in the order Open passes them to RocksDB (the index into DB.cfs).
const (
	cfDefault = iota
	cfHooks
	cfDeliveries
	cfIndex
	cfArchive
	cfQuarantine
	cfAudit
	cfCount
)

var cfNames = [cfCount]string{"default", "hooks", "deliveries", "index", "archive", "quarantine", "audit"}

// Memory budget: one block cache shared by every column family, and memtables capped in total, so the store's
// footprint does not grow with the number of column families.
const (
	blockCacheBytes  = 64 << 20
	writeBufferBytes = 32 << 20
	totalMemtables   = 2 * writeBufferBytes
)

// Options configures Open.
type Options struct {
	Dir    string // <data_dir>/<instance>/store; created if missing
	Log    zerolog.Logger
	Faults *Faults // nil in production

	// DedupeMaxEntries (dedupe.max_entries) bounds the dedupe keys on the node and DedupeMaxEntriesPerTenant
	// (dedupe.max_entries_per_tenant) those of one tenant; 0 is unlimited. A record whose new key would pass
	// either is refused with ErrDedupeQuota. DedupeMaxEntriesPerSource (dedupe.max_entries_per_source) bounds
	// those of one source over every tenant, so one sender cannot take a tenant's or the node's share.
	DedupeMaxEntries, DedupeMaxEntriesPerTenant, DedupeMaxEntriesPerSource int64

	// OutcomeInterval is the least time between two outcome groups while running delivery attempts have not
	// queued their outcomes yet (outcomes.go): 0 means DefaultOutcomeInterval, < 0 no pacing.
	OutcomeInterval time.Duration

	// BackgroundWriteBytesPerSec paces the writes of RocksDB's flushes and compactions (store.background_write_
	// mb_per_s); 0 leaves them unpaced. An unpaced flush writes its table at the disk's full speed, and a synced
	// WAL write issued meanwhile waits for the journal commit that orders it after that data: the acks' tail.
	BackgroundWriteBytesPerSec int64

	// DeleteBytesPerSec (store.delete_mb_per_s) is the rate at which RocksDB deletes obsolete WAL and table
	// files, a few MiB at a time (pacedelete.go); 0 deletes each file at once.
	DeleteBytesPerSec int64

	// CommitThreadNice (store.commit_thread_nice) is the nice value of the thread that makes the group commit's
	// synced write (syncwrite.go); 0 leaves it the process's. A value the process may not take (below its own
	// without CAP_SYS_NICE or an RLIMIT_NICE that allows it) is logged once per open, and the thread keeps the
	// process's.
	CommitThreadNice int

	// OnCommitWait, when set, hears how long each CommitHooks waited for the store's write locks before its
	// synced write: the part of a group commit spent behind dispatch's claims and outcome groups, sweeps and
	// the other writes that change counters, apart from the disk's part. It runs with the locks held: keep it
	// to an observation.
	OnCommitWait func(time.Duration)

	// OnSyncWrite, when set, hears how long each group commit's synced write ran in RocksDB on the commit thread
	// (the WAL append, its sync and the memtable insert): the disk's part of a commit, apart from the lock wait
	// and the hand-offs to and from the thread, which wait for cores. It runs with the locks held: keep it to an
	// observation.
	OnSyncWrite func(time.Duration)
}

// Faults lets tests inject failures into the commit path.
type Faults struct {
	// BeforeCommit runs inside CommitHooks, and the quarantine writes (PutQuarantine, PurgeQuarantine,
	// ReleaseQuarantine), just before the synced write. It may block (to hold the sync) or return an error (the
	// call then fails with it and nothing is written).
	BeforeCommit func() error
	// BeforeAudit runs inside every audited write (audit.go) just before its synced write; an error fails the
	// write, so the change and its row are both refused.
	BeforeAudit func() error
	// AfterDedupeScan runs inside SweepDedupe after it read the due expiry keys and before it takes the write
	// lock, so a test can commit in between.
	AfterDedupeScan func()
}

// Record is one hook to commit: its encoded value and the obligations to write beside it.
type Record struct {
	ID         [16]byte
	Tenant     string
	Source     string // the source id, copied into every delivery row (dispatch routes by it)
	ReceivedAt int64  // unix ms, copied into every delivery row; the first due time is the commit time
	Size       uint32 // body size, charged by byte-bounded windows
	Value      []byte // AppendHook output, encoded on the caller's goroutine
	Sinks      []SinkBinding
	Archive    bool // write an archive obligation (only while the storage role runs)
	// ReplayID is copied into every delivery row: set for a hook an archive replay commits again
	// (RedriveArchivedStep), so its deliveries carry the job's replay id.
	ReplayID string

	// DedupeKey is the provider event key; with DedupeTTL > 0 the record is committed only if no live key of
	// (Tenant, Source, DedupeKey) exists, and then holds the key for DedupeTTL. Either one empty: no dedupe.
	DedupeKey string
	DedupeTTL time.Duration

	// Outcome is written by CommitHooks for every record of a call that returned no error.
	Outcome Outcome
}

// OutcomeStatus is what CommitHooks did with one record.
type OutcomeStatus uint8

// Outcome statuses. The zero value is none of them: a record whose commit failed, or never ran.
const (
	OutcomeCommitted OutcomeStatus = iota + 1 // written with its seq
	OutcomeDuplicate                          // a live key of its scope exists: nothing written, no seq
	OutcomeRefused                            // not written, no seq: Err says why (ErrDedupeQuota)
)

// Outcome is one record's share of a successful CommitHooks.
type Outcome struct {
	Status     OutcomeStatus
	Seq        uint64   // committed: the record's seq
	OriginalID [16]byte // duplicate: the id of the hook holding the key
	Err        error    // refused: ErrDedupeQuota, or ErrBadKey/ErrCorruptValue for a scope or key it cannot use
}

// SinkBinding names one sink of the hook's source: its index in the source's sink list, its type, and whether
// its deliveries run in seq order (an ordered lane).
type SinkBinding struct {
	Index   uint16
	Type    string
	Ordered bool
}

// DB is an open store. All methods are safe for concurrent use.
//
// Lock order: commitMu, then cmu, then qmu, then closeMu, then stateMu (see doc.go for what each guards and why
// the synced commit holds cmu).
type DB struct {
	dir    string
	log    zerolog.Logger
	faults *Faults
	// bgWriteRate is Options.BackgroundWriteBytesPerSec (0: unpaced), kept for every reopen.
	bgWriteRate int64
	// deleteRate is Options.DeleteBytesPerSec (0: files deleted at once), kept for every reopen.
	deleteRate int64
	// commitNice is Options.CommitThreadNice, kept for every reopen.
	commitNice int
	// onCommitWait is Options.OnCommitWait (nil: none).
	onCommitWait func(time.Duration)
	// onSyncWrite is Options.OnSyncWrite (nil: none).
	onSyncWrite func(time.Duration)

	// closeMu is held shared by every operation on the RocksDB handles and exclusively by Close, so no handle
	// is freed under a running call.
	closeMu sync.RWMutex
	closed  bool

	rdb     *grocksdb.DB
	cfs     [cfCount]*grocksdb.ColumnFamilyHandle
	opts    *grocksdb.Options
	bbto    *grocksdb.BlockBasedTableOptions
	cache   *grocksdb.Cache
	ro      *grocksdb.ReadOptions
	wo      *grocksdb.WriteOptions // sync=true: commits, replay steps, replay jobs, meta
	sw      *syncWriter            // the group commit's synced write, on a thread of its own (syncwrite.go)
	woAsync *grocksdb.WriteOptions // sync=false: dispatch outcomes and lane blocks (at-least-once tolerates losing one)

	storeID string

	// nextSeq is the first seq of the next group. It only grows: a failed commit burns its seqs. Written under
	// commitMu, read by NextSeq without it.
	nextSeq atomic.Uint64

	// commitMu serialises CommitHooks (seq and ordinal assignment must follow write order) and guards the rest.
	commitMu sync.Mutex
	nextOrd  uint32
	ords     map[string]uint32
	wb       *grocksdb.WriteBatch // reused: cleared per commit
	key, val []byte               // scratch encodings, copied into wb by RocksDB
	// archived is the records of the group being built that take an archive obligation; their keys go into the
	// batch after the loop (addRecordsLocked says why).
	archived   []*Record
	newTenants []tenantOrd
	lastCommit int64 // commit time of the last group (unix ms): commit times never go backwards
	// seen maps the dedupe scopes committed earlier in the group being built to their hook ids: the first
	// occurrence of a key wins within a group as across groups.
	seen                                        map[DedupeScope][16]byte
	extra                                       CommitExtra // what CommitHooksWith adds to the commit in progress
	dedupeMax, dedupeMaxTenant, dedupeMaxSource int64

	// cmu is held by every write that changes a counter, from reading the counters it starts from until its
	// batch is written and applied to qs, so batches reach RocksDB in the order their absolute counter values
	// were computed. It guards the scratch below.
	cmu        sync.Mutex
	ed         editSet
	owb        *grocksdb.WriteBatch  // outcome batches, cleared per use
	wro        *grocksdb.ReadOptions // bounded iterations of the writers
	wroUpper   []byte                // wro's upper bound; RocksDB reads it in place, so it stays put
	okey, oval []byte
	lastKey    []byte
	clear      clearScratch // clearObligations' (archive.go)
	oq         outcomeQueue // outcomes waiting for a group (outcomes.go); its maps are cmu's scratch
	// inflight holds the inflight key of every row claimed since the store opened and not settled since, so an
	// outcome knows its row is still claimed without a read under cmu. Every write that adds or deletes
	// inflight keys (ClaimDue, the outcomes, RecoverInflight, EraseTenantRows) changes it after its batch is
	// written; a row claimed before the store opened is not in it, and RecoverInflight makes such rows due.
	inflight map[InflightKey]struct{}
	// markers holds the seq of every hook that may have a claim marker (claims.go): those found at open and
	// those PutClaimRef recorded since, less those whose batch deleted them. A hook's deletion deletes its marker
	// only when its seq is here, so the outcome of a hook that never had one (nearly all) writes no tombstone
	// into the index CF's memtable between its other keys there.
	markers map[uint64]struct{}

	// freshMu guards fresh (but its claims and hook, cmu's scratch) and is a leaf (fresh.go).
	freshMu   sync.Mutex
	fresh     freshState
	freshFull []uint32 // the commit's copy of the grant's exclusions, reused

	// qmu serialises the writes of the quarantine pen (quarantine.go) from reading the pen counters until their
	// batch is written and applied, as cmu does for the queue counters; ReleaseQuarantine takes it after cmu. It
	// guards the scratch below. A pen write does not take cmu, so a pen tick's fsync never holds up an ingest
	// commit's counters, and RocksDB may sync both in one WAL write.
	qmu        sync.Mutex
	qwb        *grocksdb.WriteBatch
	qkey, qval []byte
	qseen      map[[penIDLen]byte]struct{} // pen entries already in the batch being built
	qchg       []penChange                 // the per-source and per-tenant changes of the batch being built

	// stateMu guards qs for readers; writers change qs holding cmu and stateMu both (qmu and stateMu for the
	// pen counters), so Counts, ActiveTenants, TenantName and QuarantineStats never wait for a write, let alone
	// an fsync.
	stateMu sync.Mutex
	qs      queueState

	// amu serialises the audited writes (audit.go): audit seq assignment follows write order, and a change's
	// read of its subject and its write are one step. It is taken alone (before closeMu).
	amu sync.Mutex
	aud auditState
	// anotify is signalled after every audited write (AuditNotify).
	anotify chan struct{}

	isClosed atomic.Bool // Close has started: the in-memory readers answer zero values
	notify   chan struct{}
}

type tenantOrd struct {
	tenant string
	ord    uint32
}

// Open opens (creating if missing) the store in opts.Dir. Every refusal is an *OpenError: a store that cannot
// be read, or whose contents contradict each other, is never opened as if it were empty or shorter.
func Open(opts Options) (*DB, error) {
	if opts.Dir == "" {
		return nil, &OpenError{Path: opts.Dir, Err: errors.New("no directory given")}
	}
	fresh, err := checkDir(opts.Dir)
	if err != nil {
		return nil, &OpenError{Path: opts.Dir, Err: err}
	}
	db := &DB{dir: opts.Dir, log: opts.Log, faults: opts.Faults, ords: make(map[string]uint32),
		bgWriteRate: opts.BackgroundWriteBytesPerSec, deleteRate: opts.DeleteBytesPerSec, onCommitWait: opts.OnCommitWait,
		onSyncWrite: opts.OnSyncWrite, commitNice: opts.CommitThreadNice,
		notify: make(chan struct{}, 1), anotify: make(chan struct{}, 1), ed: newEditSet(), wroUpper: make([]byte, 0, 32),
		seen: make(map[DedupeScope][16]byte), qseen: make(map[[penIDLen]byte]struct{}),
		dedupeMax: max(0, opts.DedupeMaxEntries), dedupeMaxTenant: max(0, opts.DedupeMaxEntriesPerTenant),
		dedupeMaxSource: max(0, opts.DedupeMaxEntriesPerSource)}
	db.oq.interval, db.oq.hurry = opts.OutcomeInterval, make(chan struct{}, 1)
	if db.oq.interval == 0 {
		db.oq.interval = DefaultOutcomeInterval
	}
	if err := db.open(fresh); err != nil {
		db.release()
		return nil, &OpenError{Path: opts.Dir, Err: err}
	}
	db.log.Info().Str("dir", db.dir).Str("store_id", db.storeID).Uint64("next_seq", db.nextSeq.Load()).
		Int("tenants", len(db.ords)).Bool("created", fresh).Msg("store opened")
	return db, nil
}

// checkDir creates dir if needed and tells whether it holds no database yet. A directory with RocksDB files but
// no CURRENT is refused: create_if_missing would otherwise start an empty database over the old one.
func checkDir(dir string) (fresh bool, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return false, fmt.Errorf("cannot create directory: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("cannot stat CURRENT: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("cannot list directory: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "MANIFEST-") || strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".log") ||
			strings.HasSuffix(n, ".blob") {
			return false, fmt.Errorf("database file %s present but CURRENT missing", n)
		}
	}
	return true, nil
}

// niceRefused is what an open logs when the commit thread cannot take store.commit_thread_nice.
const niceRefused = "the commit thread runs at the process's priority (store.commit_thread_nice)"

func (db *DB) open(fresh bool) error {
	db.cache = grocksdb.NewLRUCache(blockCacheBytes)
	db.bbto = grocksdb.NewDefaultBlockBasedTableOptions()
	db.bbto.SetBlockCache(db.cache)
	db.bbto.SetFilterPolicy(grocksdb.NewBloomFilterFull(10))
	// Index and filter blocks live in the block cache, so the store's memory is bounded by the cache and the
	// memtables however many tables it holds (outside the cache they grow with every table written, which a
	// long run shows as RSS creeping up while the Go heap stays flat); L0's are pinned so the dedupe lookups
	// of fresh hooks never wait for them.
	db.bbto.SetCacheIndexAndFilterBlocks(true)
	db.bbto.SetPinL0FilterAndIndexBlocksInCache(true)

	o := grocksdb.NewDefaultOptions()
	db.opts = o
	o.SetCreateIfMissing(true)
	o.SetCreateIfMissingColumnFamilies(true)
	o.SetParanoidChecks(true)
	// A torn tail (a write that never returned, so was never acknowledged) is dropped; a bad record before the
	// end of the log fails the open instead of replaying up to it (point-in-time recovery would open shorter).
	o.SetWALRecoveryMode(grocksdb.TolerateCorruptedTailRecordsRecovery)
	o.SetBlockBasedTableFactory(db.bbto)
	o.SetWriteBufferSize(writeBufferBytes)
	o.SetMaxWriteBufferNumber(2)
	o.SetDbWriteBufferSize(totalMemtables)
	o.SetKeepLogFileNum(4)
	o.SetMaxLogFileSize(8 << 20)
	// Flushes and compactions start writing out their tables every MiB instead of leaving the whole table to
	// one fsync at its end, which on a journaling file system the synced WAL writes (the acks) wait behind.
	o.SetBytesPerSync(1 << 20)
	if db.bgWriteRate > 0 {
		// Refilled every 10 ms, so a flush never writes more than a 100th of a second's budget in one burst
		// (fairness 10: the default share of low-priority compaction writes against flushes).
		o.SetRateLimiter(grocksdb.NewRateLimiter(db.bgWriteRate, 10_000, 10))
	}
	if db.deleteRate > 0 {
		if err := paceDeletes(o, db.deleteRate); err != nil {
			return err
		}
	}

	cfOpts := make([]*grocksdb.Options, cfCount)
	for i := range cfOpts {
		cfOpts[i] = o
	}
	rdb, handles, err := grocksdb.OpenDbColumnFamilies(o, db.dir, cfNames[:], cfOpts)
	if err != nil {
		return fmt.Errorf("cannot open rocksdb: %w", err)
	}
	db.rdb = rdb
	copy(db.cfs[:], handles)
	var niceErr error
	if db.sw, niceErr, err = newSyncWriter(db.commitNice); err != nil {
		return err
	}
	if niceErr != nil {
		db.log.Info().Err(niceErr).Msg(niceRefused)
	}
	if state := crc32cState(); state != "hardware" {
		db.log.Info().Str("crc32c", state).Msg("rocksdb checksums run on the library's own CRC32C, not the CPU's crc32 instruction (store/crc32c.c)")
	}

	db.ro = grocksdb.NewDefaultReadOptions()
	db.ro.SetVerifyChecksums(true)
	db.wo = grocksdb.NewDefaultWriteOptions()
	db.wo.SetSync(true)
	db.woAsync = grocksdb.NewDefaultWriteOptions()
	db.wb = grocksdb.NewWriteBatch()
	db.owb = grocksdb.NewWriteBatch()
	db.qwb = grocksdb.NewWriteBatch()
	db.wro = grocksdb.NewDefaultReadOptions()
	db.wro.SetVerifyChecksums(true)

	if err := db.loadMeta(fresh); err != nil {
		return err
	}
	return db.loadMarkers()
}

// loadMeta reads every meta key and tenant ordinal and checks them against each other and the hooks CF. A read
// error fails the open: an unreadable store is never reported as empty.
func (db *DB) loadMeta(fresh bool) error {
	version, err := db.getCF(cfDefault, []byte(metaFormatVersion))
	if err != nil {
		return err
	}
	if version == nil {
		// No format marker: a new database, or one whose creation stopped before the meta was written. Either way
		// it must hold nothing at all, or this is damage.
		for cf := range cfCount {
			empty, err := db.cfEmpty(cf)
			if err != nil {
				return err
			}
			if !empty {
				return fmt.Errorf("column family %s holds data but %s is missing", cfNames[cf], metaFormatVersion)
			}
		}
		if !fresh {
			db.log.Warn().Str("dir", db.dir).Msg("store has no meta and no data; initialising it")
		}
		if err := db.initMeta(); err != nil {
			return err
		}
		return db.loadCounters()
	}
	if len(version) != 4 || (binary.BigEndian.Uint32(version) != FormatVersion && binary.BigEndian.Uint32(version) != 1) {
		return fmt.Errorf("%s = %x, this build reads formats 1 and %d", metaFormatVersion, version, FormatVersion)
	}
	id, err := db.getCF(cfDefault, []byte(metaStoreID))
	if err != nil {
		return err
	}
	if len(id) == 0 {
		return fmt.Errorf("%s missing", metaStoreID)
	}
	db.storeID = string(id)
	next, err := db.getCF(cfDefault, []byte(metaNextSeq))
	if err != nil {
		return err
	}
	if len(next) != 8 {
		return fmt.Errorf("%s = %x: want 8 bytes", metaNextSeq, next)
	}
	db.nextSeq.Store(binary.BigEndian.Uint64(next))
	ord, err := db.getCF(cfDefault, []byte(metaNextOrd))
	if err != nil {
		return err
	}
	if len(ord) != 4 {
		return fmt.Errorf("%s = %x: want 4 bytes", metaNextOrd, ord)
	}
	db.nextOrd = binary.BigEndian.Uint32(ord)

	seen := make(map[uint32]string)
	err = db.scan(cfDefault, []byte(tenantPrefix), func(k, v []byte) error {
		tenant := string(k[len(tenantPrefix):])
		if len(v) != 4 {
			return fmt.Errorf("tenant %q ordinal %x: want 4 bytes", tenant, v)
		}
		o := binary.BigEndian.Uint32(v)
		if o >= db.nextOrd {
			return fmt.Errorf("tenant %q ordinal %d not below %s %d", tenant, o, metaNextOrd, db.nextOrd)
		}
		if other, dup := seen[o]; dup {
			return fmt.Errorf("tenants %q and %q share ordinal %d", other, tenant, o)
		}
		seen[o] = tenant
		db.ords[tenant] = o
		return nil
	})
	if err != nil {
		return err
	}
	if err := db.checkSeq(); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(version) == 1 {
		if err := db.migrateV1(); err != nil {
			return err
		}
	}
	return db.loadCounters()
}

// checkSeq refuses a store whose newest hook is at or past m:next_seq: they are written in one batch, so that
// can only be damage, and committing would reuse a seq.
func (db *DB) checkSeq() error {
	it := db.rdb.NewIteratorCF(db.ro, db.cfs[cfHooks])
	defer it.Close()
	it.SeekToLast()
	if it.Valid() {
		seq, err := ParseHookKey(it.Key().Data())
		if err != nil {
			return fmt.Errorf("last hook key: %w", err)
		}
		if next := db.nextSeq.Load(); seq >= next {
			return fmt.Errorf("last hook seq %d is not below %s %d", seq, metaNextSeq, next)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("cannot read the last hook key: %w", err)
	}
	return nil
}

// initMeta writes the meta of a new store in one synced batch. Seqs and ordinals start at 1 so a zero value
// never names a real hook or tenant.
func (db *DB) initMeta() error {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("cannot make a store id: %w", err)
	}
	db.storeID = strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw[:]))
	db.nextSeq.Store(1)
	db.nextOrd = 1
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	cf := db.cfs[cfDefault]
	wb.PutCF(cf, []byte(metaStoreID), []byte(db.storeID))
	wb.PutCF(cf, []byte(metaFormatVersion), binary.BigEndian.AppendUint32(nil, FormatVersion))
	wb.PutCF(cf, []byte(metaNextSeq), binary.BigEndian.AppendUint64(nil, 1))
	wb.PutCF(cf, []byte(metaNextOrd), binary.BigEndian.AppendUint32(nil, 1))
	if err := db.rdb.Write(db.wo, wb); err != nil {
		return fmt.Errorf("cannot write the meta of a new store: %w", err)
	}
	return nil
}

// release frees whatever open managed to allocate (every field may be nil).
func (db *DB) release() {
	// The write thread first: it writes through the handles released below (no write is in flight here).
	if db.sw != nil {
		db.sw.close()
		db.sw = nil
	}
	for _, wb := range []*grocksdb.WriteBatch{db.wb, db.owb, db.qwb, db.aud.wb} {
		if wb != nil {
			wb.Destroy()
		}
	}
	for _, ro := range []*grocksdb.ReadOptions{db.ro, db.wro} {
		if ro != nil {
			ro.Destroy()
		}
	}
	for _, wo := range []*grocksdb.WriteOptions{db.wo, db.woAsync} {
		if wo != nil {
			wo.Destroy()
		}
	}
	for i, h := range db.cfs {
		if h != nil {
			h.Destroy()
			db.cfs[i] = nil
		}
	}
	if db.rdb != nil {
		db.rdb.Close()
	}
	if db.opts != nil {
		db.opts.Destroy()
	}
	if db.bbto != nil {
		db.bbto.Destroy()
	}
	if db.cache != nil {
		db.cache.Destroy()
	}
}

// Close closes the store, waiting for calls in progress. It is idempotent; every other call made after it
// returns ErrClosed.
func (db *DB) Close() error {
	db.closeMu.Lock()
	defer db.closeMu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	db.isClosed.Store(true)
	db.release()
	db.log.Info().Str("dir", db.dir).Uint64("next_seq", db.nextSeq.Load()).Msg("store closed")
	return nil
}

// Probe tells whether the store takes a synced write now: it rewrites the store id, unchanged, through the
// commit path's locks, fault hook and write options. The store owner calls it after a failed write (and after
// reopening) so readiness returns once a write succeeds, without waiting for a caller's hook to try.
func (db *DB) Probe() error {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	if f := db.faults; f != nil && f.BeforeCommit != nil {
		if err := f.BeforeCommit(); err != nil {
			return &WriteError{Class: classify(err), Err: err}
		}
	}
	if err := db.rdb.PutCF(db.wo, db.cfs[cfDefault], []byte(metaStoreID), []byte(db.storeID)); err != nil {
		return &WriteError{Class: classify(err), Err: err}
	}
	return nil
}

// Dir is the directory the store lives in.
func (db *DB) Dir() string { return db.dir }

// StoreID is the random id written when the store was created (backups name their owner with it).
func (db *DB) StoreID() string { return db.storeID }

// NextSeq is the seq the next committed hook will get at the earliest.
func (db *DB) NextSeq() uint64 { return db.nextSeq.Load() }

// CommitHooks writes recs as one synced WriteBatch and sets every record's Outcome. Per record it first settles
// dedupe (a record with a DedupeKey and DedupeTTL > 0), in the order of recs, at the group's commit time:
//   - a live key of the record's scope, in the store or committed earlier in recs: OutcomeDuplicate with the
//     first occurrence's id (the writer's re-check, inventory K.10: a caller's dedupe read may predate another
//     partition's commit);
//   - else a new key that would pass DedupeMaxEntries or DedupeMaxEntriesPerTenant: OutcomeRefused with
//     ErrDedupeQuota (a hook is never stored without its key);
//   - else the record is committed and its dedupe key and expiry key go into the batch.
//
// A committed record gets the hook row, one pending delivery row and due key per sink, the archive obligation
// when asked; the batch adds new tenant ordinals, the new counters of every tenant it touches and m:next_seq.
// Duplicate and refused records get no seq and nothing of them is written. It returns the seq of the first
// committed record: the committed records get first, first+1, … in the order of recs (each in its
// Outcome.Seq). It returns only after the batch is synced (or failed, with nothing written and no Outcome to
// read); a call that commits nothing writes nothing. A record with neither sinks nor an archive obligation
// gets its seq (and its dedupe key) but no row: nothing would ever reclaim it (inventory E.3, "acked with a
// seq but not stored").
//
// Every new row is first due at the group's commit time (unix ms, never earlier than the previous group's), not
// at its ReceivedAt: first attempts then sort in the due index by seq, which ordered lanes rely on.
//
// Seqs are dense over the committed records of a call and strictly increasing across calls and restarts; a
// failed write burns its seqs. Concurrent callers are serialised.
func (db *DB) CommitHooks(recs []*Record) (first uint64, err error) {
	return db.commitHooks(recs, CommitExtra{})
}

// commitHooks is CommitHooks with a dual commit's additions (x, zero for none).
func (db *DB) commitHooks(recs []*Record, x CommitExtra) (first uint64, err error) {
	asked := time.Now()
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	db.cmu.Lock()
	defer db.cmu.Unlock()
	if db.onCommitWait != nil {
		db.onCommitWait(time.Since(asked))
	}
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return 0, ErrClosed
	}
	if len(recs) == 0 {
		return db.nextSeq.Load(), nil
	}
	if x.Pending || x.BeforeWrite != nil {
		db.extra = x
		defer func() { db.extra = CommitExtra{} }()
	}
	return db.commitLocked(recs, nil)
}

// commitLocked is CommitHooks with its locks held (commitMu, cmu, closeMu shared; the store open). With rel set
// it is a quarantine release (ReleaseQuarantine, which also holds qmu): rel's pen entry is deleted and the pen
// counters rewritten in the same batch, unless the record was refused.
func (db *DB) commitLocked(recs []*Record, rel *penRelease) (first uint64, err error) {
	first = db.nextSeq.Load()
	at := max(time.Now().UnixMilli(), db.lastCommit)
	db.lastCommit = at

	wb := db.wb
	wb.Clear()
	db.ed.reset()
	db.newTenants = db.newTenants[:0]
	if len(db.seen) > 0 {
		clear(db.seen)
	}
	defer func() {
		if len(db.seen) > 0 {
			clear(db.seen) // drop the records' strings now rather than at the next commit
		}
	}()
	ordBefore := db.nextOrd
	ft := db.takeFreshLocked()
	written := false
	defer func() { db.endFreshLocked(&ft, written) }()
	seq, _, err := db.addRecordsLocked(wb, recs, first, at, &ft)
	if err != nil {
		db.ed.reset()
		return 0, err
	}
	release := rel != nil && recs[0].Outcome.Status != OutcomeRefused
	if seq == first && !release {
		// Every record was a duplicate or refused: nothing to write, no seq burned, no ordinal assigned (only a
		// committed record with sinks takes one).
		db.ed.reset()
		return first, nil
	}
	if seq != first {
		// Burned before the write: whatever happens below, these seqs are never handed out again in this
		// process, and m:next_seq on disk covers every seq that reached disk because it is in the same batch.
		db.putSeqMetaLocked(wb, ordBefore, seq)
	}
	var pen penCounts
	if release {
		pen = db.penReleaseLocked(wb, rel)
	}

	if rel == nil && (db.extra.Pending || db.extra.BeforeWrite != nil) {
		db.addExtraLocked(wb, recs)
	}
	if f := db.faults; f != nil && f.BeforeCommit != nil {
		if err := f.BeforeCommit(); err != nil {
			db.ed.reset()
			return 0, &WriteError{Class: classify(err), Err: err}
		}
	}
	if err := db.sw.write(db.rdb, db.wo, wb); err != nil {
		// New ordinals stay burned like the seqs (db.nextOrd is not rolled back) so an ordinal is never given to
		// two tenants; the tenants simply get fresh ones on their next commit. A write that fails after reaching
		// the WAL leaves RocksDB refusing writes until the store is reopened. The counters in memory are left as
		// they were; the batch carried its own beside its rows, so a reopen reads counters that match whichever
		// rows reached disk.
		db.ed.reset()
		return 0, &WriteError{Class: classify(err), Err: err}
	}
	written = true
	if db.onSyncWrite != nil {
		db.onSyncWrite(db.sw.took())
	}
	for _, t := range db.newTenants {
		db.ords[t.tenant] = t.ord
	}
	db.applyEditsLocked(db.newTenants)
	if release {
		db.setPenLocked(pen)
	}
	if ft.due > 0 {
		db.wake() // rows went due (a row claimed fresh needs no scan)
	}
	return first, nil
}

// putSeqMetaLocked burns the seqs below next in memory and adds to wb what a batch committing records up to
// next writes beside their rows: the new tenants' ordinals, m:next_ord (when ordinals were assigned since
// ordBefore), the counters and m:next_seq.
func (db *DB) putSeqMetaLocked(wb *grocksdb.WriteBatch, ordBefore uint32, next uint64) {
	meta := db.cfs[cfDefault]
	db.nextSeq.Store(next)
	for _, t := range db.newTenants {
		db.key = appendTenantKey(db.key[:0], t.tenant)
		db.val = binary.BigEndian.AppendUint32(db.val[:0], t.ord)
		wb.PutCF(meta, db.key, db.val)
	}
	if db.nextOrd != ordBefore {
		db.key = append(db.key[:0], metaNextOrd...)
		db.val = binary.BigEndian.AppendUint32(db.val[:0], db.nextOrd)
		wb.PutCF(meta, db.key, db.val)
	}
	db.putCountersLocked(wb)
	db.key = append(db.key[:0], metaNextSeq...)
	db.val = binary.BigEndian.AppendUint64(db.val[:0], next)
	wb.PutCF(meta, db.key, db.val)
}

// addRecordsLocked adds recs to wb as CommitHooks commits them at `at` (unix ms), the first committed one
// taking seq first, and sets every record's Outcome. It returns the seq after the last committed record and how
// many records got rows. The counter changes go to db.ed; the caller adds them (putCountersLocked) and the meta.
func (db *DB) addRecordsLocked(wb *grocksdb.WriteBatch, recs []*Record, first uint64, at int64, ft *freshTake) (next uint64,
	rows int, err error) {
	hooks, deliveries, index := db.cfs[cfHooks], db.cfs[cfDeliveries], db.cfs[cfIndex]
	seq := first
	archived := db.archived[:0]
	for _, r := range recs {
		r.Outcome = Outcome{}
		if r.DedupeKey != "" && r.DedupeTTL > 0 {
			commit, err := db.dedupeLocked(wb, r, at)
			if err != nil {
				return 0, 0, err
			}
			if !commit {
				continue
			}
		}
		r.Outcome = Outcome{Status: OutcomeCommitted, Seq: seq}
		seq++
		if len(r.Sinks) == 0 && !r.Archive {
			continue
		}
		rows++
		db.key = AppendHookKey(db.key[:0], r.Outcome.Seq)
		wb.PutCF(hooks, db.key, r.Value)
		if len(r.Sinks) > 0 {
			ord := db.ordinalLocked(r.Tenant)
			e := db.editLocked(ord)
			db.fresh.hook = nil
			for _, s := range r.Sinks {
				row := DeliveryRow{SinkIndex: s.Index, SinkType: s.Type, State: StatePending, DueAt: at, Size: r.Size,
					Source: r.Source, Ordered: s.Ordered, ReceivedAt: r.ReceivedAt, ReplayID: r.ReplayID}
				db.key = DeliveryKey{Seq: r.Outcome.Seq, Sink: s.Index}.Append(db.key[:0])
				db.val = AppendDeliveryRow(db.val[:0], &row)
				wb.PutCF(deliveries, db.key, db.val)
				if ft.wants(r.Tenant, ord, r.Size, s.Ordered) {
					db.addFreshLocked(wb, r, ord, at, row, len(r.Sinks) == 1)
					e.counts.inflight++
					continue
				}
				db.key = DueKey{Ord: ord, At: at, Seq: r.Outcome.Seq, Sink: s.Index}.Append(db.key[:0])
				db.val = AppendIndexValue(db.val[:0], r.Size)
				wb.PutCF(index, db.key, db.val)
				ft.due++
				e.dueWritten(db.key)
				e.counts.pending++
				e.counts.pendingBytes += int64(r.Size)
			}
		}
		if r.Archive {
			archived = append(archived, r)
		}
	}
	// The obligations go after the loop, in one run: interleaved with the due keys (the same CF, another key
	// range), every insert would leave the memtable's insertion point at the other range, so each one paid a
	// descent of the skip list from the top instead of a step from the last key. Measured (BenchmarkCommitHooks,
	// archive on) as most of what the obligations added to a commit.
	for _, r := range archived {
		db.key = AppendArchiveKey(db.key[:0], r.Outcome.Seq)
		db.val = AppendIndexValue(db.val[:0], r.Size)
		wb.PutCF(index, db.key, db.val)
		db.ed.archive++
	}
	clear(archived)
	db.archived = archived[:0]
	return seq, rows, nil
}

// ordinalLocked returns tenant's ordinal, assigning the next one (recorded in newTenants until the write
// succeeds) the first time the tenant commits.
func (db *DB) ordinalLocked(tenant string) uint32 {
	if o, ok := db.ords[tenant]; ok {
		return o
	}
	for _, t := range db.newTenants {
		if t.tenant == tenant {
			return t.ord
		}
	}
	o := db.nextOrd
	db.nextOrd++
	db.newTenants = append(db.newTenants, tenantOrd{tenant: tenant, ord: o})
	return o
}

// TenantOrdinal returns the ordinal of tenant, if it has committed.
func (db *DB) TenantOrdinal(tenant string) (uint32, bool) {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	o, ok := db.ords[tenant]
	return o, ok
}

// classify maps a write failure to its class. RocksDB statuses reach Go only as Status::ToString() text, so
// after the typed checks (errno, an injected WriteError) the class is read from the fixed status prefixes and
// the errno text the POSIX env embeds: this is the one place the package reads an error message.
func classify(err error) WriteClass {
	var we *WriteError
	switch {
	case errors.As(err, &we):
		return we.Class
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return ClassNoSpace
	case errors.Is(err, syscall.EROFS):
		return ClassReadOnly
	case errors.Is(err, syscall.EIO):
		return ClassIOError
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.EAGAIN):
		return ClassBusy
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "No space left on device"), strings.Contains(msg, "Space limit reached"):
		return ClassNoSpace
	case strings.Contains(msg, "Read-only file system"), strings.Contains(msg, "read only mode"):
		return ClassReadOnly
	case strings.HasPrefix(msg, "Corruption:"):
		return ClassCorruption
	case strings.HasPrefix(msg, "Resource busy"), strings.HasPrefix(msg, "Operation timed out"),
		strings.HasPrefix(msg, "Operation failed. Try again"):
		return ClassBusy
	case strings.HasPrefix(msg, "IO error"):
		return ClassIOError
	}
	return ClassOther
}

// getCF reads one key, copying the value out of C memory. A missing key is (nil, nil).
func (db *DB) getCF(cf int, key []byte) ([]byte, error) {
	s, err := db.rdb.GetCF(db.ro, db.cfs[cf], key)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s key %q: %w", cfNames[cf], key, err)
	}
	defer s.Free()
	if !s.Exists() {
		return nil, nil
	}
	return bytes.Clone(s.Data()), nil
}

func (db *DB) cfEmpty(cf int) (bool, error) {
	it := db.rdb.NewIteratorCF(db.ro, db.cfs[cf])
	defer it.Close()
	it.SeekToFirst()
	empty := !it.Valid()
	if err := it.Err(); err != nil {
		return false, fmt.Errorf("cannot scan %s: %w", cfNames[cf], err)
	}
	return empty, nil
}

// scan calls fn for every key of cf starting with prefix, in order. k and v point into C memory valid only
// during the call: fn copies what it keeps. A scan that fails is an error, never a short answer.
func (db *DB) scan(cf int, prefix []byte, fn func(k, v []byte) error) error {
	it := db.rdb.NewIteratorCF(db.ro, db.cfs[cf])
	defer it.Close()
	if len(prefix) == 0 {
		it.SeekToFirst()
	} else {
		it.Seek(prefix)
	}
	for ; it.Valid(); it.Next() {
		k := it.Key().Data()
		if !bytes.HasPrefix(k, prefix) {
			break
		}
		if err := fn(k, it.Value().Data()); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("cannot scan %s: %w", cfNames[cf], err)
	}
	return nil
}

// read runs fn with the handles guaranteed open (or returns ErrClosed).
func (db *DB) read(fn func() error) error {
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	return fn()
}

// GetHook reads the hook stored at seq (ErrNotFound if there is none).
func (db *DB) GetHook(seq uint64) (Hook, error) {
	var h Hook
	err := db.read(func() error {
		v, err := db.getCF(cfHooks, AppendHookKey(nil, seq))
		if err != nil {
			return err
		}
		if v == nil {
			return fmt.Errorf("hook %d: %w", seq, ErrNotFound)
		}
		h, err = DecodeHook(v)
		if err != nil {
			return fmt.Errorf("hook %d: %w", seq, err)
		}
		return nil
	})
	return h, err
}

// ForEachHook calls fn for every stored hook in seq order, stopping at the first error. fn must not call Close.
func (db *DB) ForEachHook(fn func(seq uint64, h *Hook) error) error {
	return db.read(func() error {
		return db.scan(cfHooks, nil, func(k, v []byte) error {
			seq, err := ParseHookKey(k)
			if err != nil {
				return err
			}
			h, err := DecodeHook(v)
			if err != nil {
				return fmt.Errorf("hook %d: %w", seq, err)
			}
			return fn(seq, &h)
		})
	})
}

// ForEachDelivery calls fn for every delivery row in (seq, sink) order (not the delivered records), stopping at
// the first error. fn must not call Close.
func (db *DB) ForEachDelivery(fn func(seq uint64, r DeliveryRow) error) error {
	return db.read(func() error {
		return db.scan(cfDeliveries, nil, func(k, v []byte) error {
			if _, ok := deliveredKeyOf(k); ok {
				return nil
			}
			key, err := ParseDeliveryKey(k)
			if err != nil {
				return err
			}
			r, err := DecodeDeliveryRow(v)
			if err != nil {
				return fmt.Errorf("delivery %d/%d: %w", key.Seq, key.Sink, err)
			}
			return fn(key.Seq, r)
		})
	})
}

// ForEachDelivered calls fn for every delivered record in (seq, sink) order, stopping at the first error. fn
// must not call Close.
func (db *DB) ForEachDelivered(fn func(seq uint64, d Delivered) error) error {
	return db.read(func() error {
		return db.scan(cfDeliveries, nil, func(k, v []byte) error {
			key, ok := deliveredKeyOf(k)
			if !ok {
				return nil // a delivery row
			}
			d, err := DecodeDelivered(key.Sink, v)
			if err != nil {
				return fmt.Errorf("delivered record %d/%d: %w", key.Seq, key.Sink, err)
			}
			return fn(key.Seq, d)
		})
	})
}

// CountIndex counts the index CF keys starting with prefix (IndexDue, IndexArchive).
func (db *DB) CountIndex(prefix byte) (int, error) {
	n := 0
	err := db.read(func() error {
		return db.scan(cfIndex, []byte{prefix}, func(_, _ []byte) error {
			n++
			return nil
		})
	})
	return n, err
}

// HookIDs maps the id of every stored hook to its seq (loss tests compare it with the ids they were acked).
func (db *DB) HookIDs() (map[[16]byte]uint64, error) {
	ids := make(map[[16]byte]uint64)
	err := db.read(func() error {
		return db.scan(cfHooks, nil, func(k, v []byte) error {
			seq, err := ParseHookKey(k)
			if err != nil {
				return err
			}
			// The id sits right after the version byte; reading it alone keeps the scan cheap.
			if len(v) < 17 || !knownHookVersion(v[0]) {
				return fmt.Errorf("hook %d: %w", seq, ErrCorruptValue)
			}
			ids[[16]byte(v[1:17])] = seq
			return nil
		})
	})
	return ids, err
}
