package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/linxGnu/grocksdb"
)

// Counts are queue counters: summed over every tenant by DB.Counts, or one tenant's by DB.TenantCounts.
type Counts struct {
	Pending        int64 // first attempts waiting for their due time
	Scheduled      int64 // retries and parked rows waiting for their due time
	Inflight       int64 // claimed by dispatch
	Dead           int64 // dead-lettered (the DLQ)
	PendingBytes   int64 // stored size of the pending and scheduled rows
	ArchivePending int64 // archive obligations; node-wide, so 0 in a tenant's counts
}

// tenantCounts are one tenant's counters as persisted at c:<ord>: pending, scheduled, inflight, dead,
// pending_bytes, each a big-endian int64.
type tenantCounts struct {
	pending, scheduled, inflight, dead, pendingBytes int64
}

const counterValueLen = 5 * 8

func (c *tenantCounts) add(o tenantCounts, sign int64) {
	c.pending += sign * o.pending
	c.scheduled += sign * o.scheduled
	c.inflight += sign * o.inflight
	c.dead += sign * o.dead
	c.pendingBytes += sign * o.pendingBytes
}

func (c *tenantCounts) waiting() bool { return c.pending+c.scheduled > 0 }

func (c *tenantCounts) export() Counts {
	return Counts{Pending: c.pending, Scheduled: c.scheduled, Inflight: c.inflight, Dead: c.dead,
		PendingBytes: c.pendingBytes}
}

func appendCounts(dst []byte, c *tenantCounts) []byte {
	for _, v := range [...]int64{c.pending, c.scheduled, c.inflight, c.dead, c.pendingBytes} {
		dst = binary.BigEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

func decodeCounts(b []byte) (tenantCounts, error) {
	if len(b) != counterValueLen {
		return tenantCounts{}, fmt.Errorf("counters of %d bytes: %w", len(b), ErrCorruptValue)
	}
	var v [5]int64
	for i := range v {
		v[i] = int64(binary.BigEndian.Uint64(b[8*i:]))
		if v[i] < 0 {
			return tenantCounts{}, fmt.Errorf("negative counter %d: %w", v[i], ErrCorruptValue)
		}
	}
	return tenantCounts{pending: v[0], scheduled: v[1], inflight: v[2], dead: v[3], pendingBytes: v[4]}, nil
}

// tenantState is what the store keeps in memory of one tenant. Its fields change only under cmu and stateMu
// together, so a holder of either may read them.
type tenantState struct {
	counts tenantCounts
	name   string
	slot   int // index in queueState.active; -1 when the tenant has nothing waiting
	// head is a seek target at or before every live due key of the tenant (nil: the tenant's due prefix). A
	// claim moves it past the keys it deleted, so the next claim's seek does not walk their tombstones; any
	// due key written below it lowers it.
	head []byte
}

// queueState is the in-memory image of the counters: exact, because every batch that changes a counter
// writes its new absolute value and is applied here only after the write succeeded.
type queueState struct {
	tenants map[uint32]*tenantState
	active  []uint32 // tenants with pending+scheduled > 0, in no particular order
	total   tenantCounts
	archive int64

	// dedupe counts each tenant's dedupe keys (dedupe.go), by name because the keys name their tenant; a
	// pointer so a commit updates a count without storing its record's tenant string in the map.
	dedupe      map[string]*int64
	dedupeTotal int64
	// dedupeSource counts each source's dedupe keys (over every tenant), persisted beside the tenants' counts.
	dedupeSource map[string]*int64

	// pen is the quarantine pen's size and penUse its split by source and tenant (quarantine.go); they change
	// under qmu and stateMu.
	pen    penCounts
	penUse penUsage
}

func (q *queueState) tenant(ord uint32) *tenantState {
	ts, ok := q.tenants[ord]
	if !ok {
		ts = &tenantState{slot: -1}
		q.tenants[ord] = ts
	}
	return ts
}

// setCounts replaces ts's counts, keeping the totals and the active list in step.
func (q *queueState) setCounts(ord uint32, ts *tenantState, c tenantCounts) {
	q.total.add(ts.counts, -1)
	q.total.add(c, 1)
	ts.counts = c
	switch {
	case c.waiting() && ts.slot < 0:
		ts.slot = len(q.active)
		q.active = append(q.active, ord)
	case !c.waiting() && ts.slot >= 0:
		last := len(q.active) - 1
		moved := q.active[last]
		q.active[ts.slot] = moved
		q.tenants[moved].slot = ts.slot
		q.active = q.active[:last]
		ts.slot = -1
	}
}

// tenantEdit is one tenant's counters as a batch under construction will leave them, and the lowest due key
// the batch writes for it.
type tenantEdit struct {
	ord    uint32
	counts tenantCounts
	lowDue [DueKeyLen]byte
	hasLow bool
}

// editSet collects the counter changes of one batch (under cmu). Each touched tenant's new absolute counts go
// into the batch, and into memory once it is written.
type editSet struct {
	list    []tenantEdit
	idx     map[uint32]int
	archive int64 // delta of the archive obligations

	dedupe       map[string]int64 // new dedupe key count of each touched tenant
	dedupeDelta  int64            // delta of the node's dedupe keys
	dedupeSource map[string]int64 // new dedupe key count of each touched source
}

func newEditSet() editSet {
	return editSet{idx: make(map[uint32]int), dedupe: make(map[string]int64), dedupeSource: make(map[string]int64)}
}

func (e *editSet) reset() {
	e.list = e.list[:0]
	clear(e.idx)
	e.archive = 0
	if len(e.dedupe) > 0 {
		clear(e.dedupe)
	}
	if len(e.dedupeSource) > 0 {
		clear(e.dedupeSource)
	}
	e.dedupeDelta = 0
}

// editLocked returns the edit of tenant ord in the batch being built, starting from its current counts.
func (db *DB) editLocked(ord uint32) *tenantEdit {
	if i, ok := db.ed.idx[ord]; ok {
		return &db.ed.list[i]
	}
	e := tenantEdit{ord: ord}
	if ts, ok := db.qs.tenants[ord]; ok {
		e.counts = ts.counts
	}
	db.ed.idx[ord] = len(db.ed.list)
	db.ed.list = append(db.ed.list, e)
	return &db.ed.list[len(db.ed.list)-1]
}

// dueWritten records that the batch writes due key k (an encoded DueKey) for e's tenant.
func (e *tenantEdit) dueWritten(k []byte) {
	if !e.hasLow || bytes.Compare(k, e.lowDue[:]) < 0 {
		copy(e.lowDue[:], k)
		e.hasLow = true
	}
}

// dropWaiting takes one waiting row of size bytes off e's counters when its state cannot be known (its
// delivery row is missing or unreadable): pending first, else scheduled. Such rows only exist after damage.
func (e *tenantEdit) dropWaiting(size uint32) {
	if e.counts.pending > 0 {
		e.counts.pending--
	} else if e.counts.scheduled > 0 {
		e.counts.scheduled--
	}
	e.counts.pendingBytes = max(0, e.counts.pendingBytes-int64(size))
}

// putCountersLocked adds the new absolute counters of every edited tenant (and the archive count) to wb.
func (db *DB) putCountersLocked(wb *grocksdb.WriteBatch) {
	meta := db.cfs[cfDefault]
	for i := range db.ed.list {
		e := &db.ed.list[i]
		db.okey = appendCounterKey(db.okey[:0], e.ord)
		db.oval = appendCounts(db.oval[:0], &e.counts)
		wb.PutCF(meta, db.okey, db.oval)
	}
	if db.ed.archive != 0 {
		db.okey = append(db.okey[:0], metaArchive...)
		db.oval = binary.BigEndian.AppendUint64(db.oval[:0], uint64(db.qs.archive+db.ed.archive))
		wb.PutCF(meta, db.okey, db.oval)
	}
	for tenant, n := range db.ed.dedupe {
		db.okey = appendDedupeCountKey(db.okey[:0], tenant)
		if n == 0 {
			wb.DeleteCF(meta, db.okey) // a tenant's last key gone leaves nothing behind
			continue
		}
		db.oval = binary.BigEndian.AppendUint64(db.oval[:0], uint64(n))
		wb.PutCF(meta, db.okey, db.oval)
	}
	for source, n := range db.ed.dedupeSource {
		db.okey = appendDedupeSourceCountKey(db.okey[:0], source)
		if n == 0 {
			wb.DeleteCF(meta, db.okey)
			continue
		}
		db.oval = binary.BigEndian.AppendUint64(db.oval[:0], uint64(n))
		wb.PutCF(meta, db.okey, db.oval)
	}
}

// applyEditsLocked makes the written batch's counters the in-memory ones (under cmu, after the write
// succeeded), registering the names of tenants the batch created.
func (db *DB) applyEditsLocked(names []tenantOrd) {
	db.stateMu.Lock()
	defer db.stateMu.Unlock()
	for _, t := range names {
		db.qs.tenant(t.ord).name = t.tenant
	}
	for i := range db.ed.list {
		e := &db.ed.list[i]
		ts := db.qs.tenant(e.ord)
		db.qs.setCounts(e.ord, ts, e.counts)
		if e.hasLow && ts.head != nil && bytes.Compare(e.lowDue[:], ts.head) < 0 {
			ts.head = append(ts.head[:0], e.lowDue[:]...)
		}
	}
	db.qs.archive += db.ed.archive
	for tenant, n := range db.ed.dedupe {
		switch c := db.qs.dedupe[tenant]; {
		case n == 0:
			delete(db.qs.dedupe, tenant)
		case c != nil:
			*c = n
		default:
			// The edit's key may be a caller's string; the image keeps a copy of its own.
			db.qs.dedupe[strings.Clone(tenant)] = &n
		}
	}
	for source, n := range db.ed.dedupeSource {
		switch c := db.qs.dedupeSource[source]; {
		case n == 0:
			delete(db.qs.dedupeSource, source)
		case c != nil:
			*c = n
		default:
			db.qs.dedupeSource[strings.Clone(source)] = &n
		}
	}
	db.qs.dedupeTotal += db.ed.dedupeDelta
	db.ed.reset()
}

// loadCounters reads every tenant's counters and the archive count (O(tenants)); called by Open after the
// tenant ordinals are loaded.
func (db *DB) loadCounters() error {
	db.qs = queueState{tenants: make(map[uint32]*tenantState), dedupe: make(map[string]*int64),
		dedupeSource: make(map[string]*int64)}
	for name, ord := range db.ords {
		db.qs.tenant(ord).name = name
	}
	err := db.scan(cfDefault, []byte(counterPrefix), func(k, v []byte) error {
		if len(k) != len(counterPrefix)+4 {
			return fmt.Errorf("counter key %q: %w", k, ErrBadKey)
		}
		ord := binary.BigEndian.Uint32(k[len(counterPrefix):])
		if ord >= db.nextOrd {
			return fmt.Errorf("counters of ordinal %d not below %s %d", ord, metaNextOrd, db.nextOrd)
		}
		c, err := decodeCounts(v)
		if err != nil {
			return fmt.Errorf("counters of ordinal %d: %w", ord, err)
		}
		db.qs.setCounts(ord, db.qs.tenant(ord), c)
		return nil
	})
	if err != nil {
		return err
	}
	a, err := db.getCF(cfDefault, []byte(metaArchive))
	if err != nil {
		return err
	}
	switch {
	case a == nil:
	case len(a) != 8 || int64(binary.BigEndian.Uint64(a)) < 0:
		return fmt.Errorf("%s = %x: want a non-negative 8-byte count", metaArchive, a)
	default:
		db.qs.archive = int64(binary.BigEndian.Uint64(a))
	}
	if db.qs.pen, err = db.loadPenCounts(); err != nil {
		return err
	}
	if db.qs.penUse, err = db.loadPenUsage(); err != nil {
		return err
	}
	err = db.scan(cfDefault, []byte(dedupeCountPrefix), func(k, v []byte) error {
		tenant := string(k[len(dedupeCountPrefix):])
		if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < 0 {
			return fmt.Errorf("dedupe key count of tenant %q = %x: want a non-negative 8-byte count", tenant, v)
		}
		n := int64(binary.BigEndian.Uint64(v))
		db.qs.dedupe[tenant] = &n
		db.qs.dedupeTotal += n
		return nil
	})
	if err != nil {
		return err
	}
	return db.loadDedupeSourceCounts()
}

// migrateV1 brings a format 1 store (written before dispatch existed: no counters; every due key a first
// attempt) to the current format: one scan of the index CF rebuilds the counters, written with the new format
// marker in one synced batch, so a crash leaves either format intact.
func (db *DB) migrateV1() error {
	counts := make(map[uint32]*tenantCounts)
	var archive int64
	err := db.scan(cfIndex, nil, func(k, v []byte) error {
		switch k[0] {
		case IndexDue:
			dk, err := ParseDueKey(k)
			if err != nil {
				return err
			}
			size, err := ParseIndexValue(v)
			if err != nil {
				return fmt.Errorf("due key %x: %w", k, err)
			}
			c, ok := counts[dk.Ord]
			if !ok {
				c = &tenantCounts{}
				counts[dk.Ord] = c
			}
			c.pending++
			c.pendingBytes += int64(size)
		case IndexArchive:
			archive++
		default:
			return fmt.Errorf("format 1 store holds index key %x: %w", k, ErrBadKey)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot migrate format 1: %w", err)
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	meta := db.cfs[cfDefault]
	for ord, c := range counts {
		wb.PutCF(meta, appendCounterKey(nil, ord), appendCounts(nil, c))
	}
	wb.PutCF(meta, []byte(metaArchive), binary.BigEndian.AppendUint64(nil, uint64(archive)))
	wb.PutCF(meta, []byte(metaFormatVersion), binary.BigEndian.AppendUint32(nil, FormatVersion))
	if err := db.rdb.Write(db.wo, wb); err != nil {
		return fmt.Errorf("cannot write the format 1 migration: %w", err)
	}
	db.log.Info().Str("dir", db.dir).Int("tenants", len(counts)).Int64("archive_pending", archive).
		Msg("store migrated from format 1: counters rebuilt")
	return nil
}

// Counts returns the queue counters summed over every tenant: kept incrementally, so O(1) whatever the
// backlog. Zero after Close.
func (db *DB) Counts() Counts {
	if db.isClosed.Load() {
		return Counts{}
	}
	db.stateMu.Lock()
	defer db.stateMu.Unlock()
	c := db.qs.total.export()
	c.ArchivePending = db.qs.archive
	return c
}

// TenantCounts returns tenant ord's counters (ArchivePending is node-wide and left 0). Zero after Close.
func (db *DB) TenantCounts(ord uint32) Counts {
	if db.isClosed.Load() {
		return Counts{}
	}
	db.stateMu.Lock()
	defer db.stateMu.Unlock()
	if ts, ok := db.qs.tenants[ord]; ok {
		return ts.counts.export()
	}
	return Counts{}
}

// ActiveTenants appends to dst the ordinals of the tenants with rows waiting (pending or scheduled), in no
// particular order. It reads the in-memory counters: O(active tenants), no scan. Nothing after Close.
func (db *DB) ActiveTenants(dst []uint32) []uint32 {
	if db.isClosed.Load() {
		return dst
	}
	db.stateMu.Lock()
	defer db.stateMu.Unlock()
	return append(dst, db.qs.active...)
}

// TenantName returns the tenant whose ordinal is ord, if it has committed. False after Close.
func (db *DB) TenantName(ord uint32) (string, bool) {
	if db.isClosed.Load() {
		return "", false
	}
	db.stateMu.Lock()
	defer db.stateMu.Unlock()
	if ts, ok := db.qs.tenants[ord]; ok && ts.name != "" {
		return ts.name, true
	}
	return "", false
}

// Notify returns a channel (capacity 1) signalled after every commit and every write that makes rows due
// (Reschedule, RecoverInflight, a replay step): a sleeping scheduler wakes on it. Signals coalesce.
func (db *DB) Notify() <-chan struct{} { return db.notify }

func (db *DB) wake() {
	select {
	case db.notify <- struct{}{}:
	default:
	}
}
