package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/linxGnu/grocksdb"
	"github.com/rs/zerolog"
)

// The archive CF holds the segment catalogue: which hooks the compactor wrote to which segment object.
//
//	'S', first_seq:64           → segment row (SegmentEntry, versioned)
//	'I', id:128                 → first_seq:64 offset:64 length:32: the segment holding the hook with this id
//	                              and where its frame is in it (fetch by id is one catalogue read, one range read)
//	'D', first_seq:64           → id:128 …: the ids of one segment, so deleting its row deletes its 'I' keys
//	                              (those still pointing at it)
//
// Cataloguing a segment (CatalogueSegment) is two steps. The first writes the segment row and its 'D' key, then
// its 'I' keys in batches of catalogueChunk (one batch of a segment's ~16,000 keys held every ingest commit
// behind its memtable insert for 20 ms): once an 'I' key is written its hook can be fetched from the segment,
// before it from the store, which holds it until the second step. The second, under cmu, deletes the hooks' archive
// obligations and every hook the obligation was the last thing holding, with m:archive_pending, in batches of
// clearChunk obligations (so an ingest commit waits for one chunk at most), each mostly range deletions (an
// obligation or hook deleted key by key costs one memtable insert each, the compactor's largest cost when it
// was measured: see clearObligations). Neither is synced (like dispatch outcomes: the next synced commit carries
// them to disk), so cataloguing never holds an ingest commit for an fsync of its own. That is safe because the
// segment and its index are durable in the blob store before the first step, and because every write of the
// store goes through one WAL in order: a crash that loses a batch loses every later one too, so the
// obligations (and the hooks they hold) outlive any catalogue row that is lost, never the reverse, and the
// compactor archives those hooks again (the same keys when the same hooks; a longer segment from the same seq
// supersedes the orphan, as Recatalogue's rule takes the longest). Never is an obligation cleared whose hook is
// in no catalogued segment.
const (
	archiveSegment byte = 'S'
	archiveID      byte = 'I'
	archiveIDs     byte = 'D'
)

// SegmentEntry is one catalogued segment.
type SegmentEntry struct {
	FirstSeq, LastSeq uint64
	SegmentKey        string // blob key of the segment object
	IndexKey          string // blob key of its index object
	Count             uint32 // records in the segment
	Bytes             int64  // size of the segment object
	MinReceivedAt     int64  // unix ms, oldest hook
	MaxReceivedAt     int64  // unix ms, newest hook
	SHA256            [32]byte
	CreatedAt         int64 // unix ms, when it was catalogued
}

const segmentEntryVersion = 1

// Encoding (version 1): version:8 first_seq:64 last_seq:64 segment_key index_key count:32 bytes:64
// min_received_at:64 max_received_at:64 sha256:256 created_at:64; strings uvarint length + bytes.

// AppendSegmentEntry appends the encoding of e to dst.
func AppendSegmentEntry(dst []byte, e *SegmentEntry) []byte {
	dst = append(dst, segmentEntryVersion)
	dst = binary.BigEndian.AppendUint64(dst, e.FirstSeq)
	dst = binary.BigEndian.AppendUint64(dst, e.LastSeq)
	dst = appendStr(dst, e.SegmentKey)
	dst = appendStr(dst, e.IndexKey)
	dst = binary.BigEndian.AppendUint32(dst, e.Count)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Bytes))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.MinReceivedAt))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.MaxReceivedAt))
	dst = append(dst, e.SHA256[:]...)
	return binary.BigEndian.AppendUint64(dst, uint64(e.CreatedAt))
}

// DecodeSegmentEntry decodes a catalogue row; it never panics and shares no memory with b.
func DecodeSegmentEntry(b []byte) (SegmentEntry, error) {
	var e SegmentEntry
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != segmentEntryVersion {
		return SegmentEntry{}, fmt.Errorf("segment row version %d: %w", v, ErrCorruptValue)
	}
	e.FirstSeq = d.uint64()
	e.LastSeq = d.uint64()
	e.SegmentKey = d.str()
	e.IndexKey = d.str()
	e.Count = d.uint32()
	e.Bytes = int64(d.uint64())
	e.MinReceivedAt = int64(d.uint64())
	e.MaxReceivedAt = int64(d.uint64())
	copy(e.SHA256[:], d.fixed(32))
	e.CreatedAt = int64(d.uint64())
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err == nil && e.LastSeq < e.FirstSeq {
		d.fail("last seq below first seq")
	}
	if d.err != nil {
		return SegmentEntry{}, fmt.Errorf("cannot decode segment row: %w", d.err)
	}
	return e, nil
}

func appendSegmentKey(dst []byte, first uint64) []byte {
	dst = append(dst, archiveSegment)
	return binary.BigEndian.AppendUint64(dst, first)
}

func appendArchivedIDKey(dst []byte, id [16]byte) []byte {
	dst = append(dst, archiveID)
	return append(dst, id[:]...)
}

func appendArchivedIDsKey(dst []byte, first uint64) []byte {
	dst = append(dst, archiveIDs)
	return binary.BigEndian.AppendUint64(dst, first)
}

// Obligation is one archive obligation with the hook it holds.
type Obligation struct {
	Seq   uint64
	Size  uint32 // the body size the commit charged
	Value []byte // the stored hook (AppendHook format); nil when the hook is missing (damage)
}

// Obligations appends to dst the archive obligations with seq > after, in seq order, with their stored hooks,
// while the hooks' encoded sizes plus overhead per hook stay within maxBytes (always at least one) and at most
// max of them. more tells that obligations after the last one returned are waiting. It takes no lock:
// obligations are deleted only by CatalogueSegment, which the one compactor calls after reading them.
func (db *DB) Obligations(after uint64, maxBytes, overhead int64, max int, dst []Obligation) (_ []Obligation,
	more bool, err error) {
	more, err = db.ScanObligations(after, maxBytes, overhead, max, func(seq uint64, size uint32, v []byte) error {
		if v != nil {
			v = bytes.Clone(v)
		}
		dst = append(dst, Obligation{Seq: seq, Size: size, Value: v})
		return nil
	})
	return dst, more, err
}

// ScanObligations calls fn with the archive obligations Obligations would return (the same seqs, limits and
// more), one at a time in seq order, with the stored hook as a view into the store's iterator (nil when the hook
// is missing) that is valid only during the call: the compactor copies it straight into its segment instead of
// cloning every hook first. fn's first error ends the scan and is returned.
func (db *DB) ScanObligations(after uint64, maxBytes, overhead int64, max int,
	fn func(seq uint64, size uint32, value []byte) error) (more bool, err error) {
	err = db.read(func() error {
		if after == ^uint64(0) || max <= 0 {
			return nil
		}
		lower := AppendArchiveKey(nil, after+1)
		it, done := db.scanIter(cfIndex, lower, []byte{IndexArchive + 1})
		defer done()
		it.Seek(lower)
		// The hooks are read with one iterator walking beside the obligations (both in seq order): a seek per
		// hook would cost a point lookup each.
		hit, hdone := db.scanIter(cfHooks, AppendHookKey(nil, after+1), nil)
		defer hdone()
		hit.Seek(AppendHookKey(nil, after+1))
		var total int64
		n := 0
		for ; it.Valid(); it.Next() {
			if n >= max {
				more = true
				break
			}
			seq, err := ParseArchiveKey(it.Key().Data())
			if err != nil {
				return err
			}
			size, err := ParseIndexValue(it.Value().Data())
			if err != nil {
				return fmt.Errorf("archive obligation %d: %w", seq, err)
			}
			var v []byte
			for hit.Valid() {
				hseq, err := ParseHookKey(hit.Key().Data())
				if err != nil {
					return err
				}
				if hseq >= seq {
					if hseq == seq {
						v = hit.Value().Data()
					}
					break
				}
				hit.Next()
			}
			if err := hit.Err(); err != nil {
				return fmt.Errorf("cannot read the hooks of the archive obligations: %w", err)
			}
			if n > 0 && total+int64(len(v))+overhead > maxBytes {
				more = true
				break
			}
			total += int64(len(v)) + overhead
			n++
			if err := fn(seq, size, v); err != nil {
				return err
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("cannot scan the archive obligations: %w", err)
		}
		return nil
	})
	return more, err
}

// ObligationsMeasure is what MeasureObligations found.
type ObligationsMeasure struct {
	Count   int    // obligations measured
	Charged int64  // the sum of their charged body sizes
	First   uint64 // seq of the first (0: none)
	Last    uint64 // seq of the last measured (where a later MeasureMore goes on from)
	// FirstReceivedAt is the received_at (unix ms) of the first one's hook; 0 when that hook is missing or
	// cannot be decoded.
	FirstReceivedAt int64
	// FirstBytes is the stored size of the first one's hook (0 when it is missing).
	FirstBytes int
	Stopped    bool // enough returned true
}

// MeasureObligations walks the archive obligations with seq > after in seq order, reading only their keys and
// charged sizes (the index CF, never the hooks but the first one's head), and stops as soon as enough, called
// with the measure after each obligation, returns true. The compactor asks it whether the oldest obligation is
// due or the waiting ones fill a segment, without copying a byte of any other hook.
func (db *DB) MeasureObligations(after uint64, enough func(*ObligationsMeasure) bool) (ObligationsMeasure, error) {
	m := ObligationsMeasure{Last: after}
	err := db.MeasureMore(&m, enough)
	return m, err
}

// MeasureMore goes on with measure m (of MeasureObligations, or of an earlier MeasureMore that did not stop)
// over the obligations after m.Last: a compactor waiting for its obligations to fill a segment measures each
// one once, not once a tick for as long as it waits. Obligations committed later always come after m.Last (seqs
// follow commit order); one deleted since it was measured (an erasure) is still counted, which can only make a
// segment due early.
func (db *DB) MeasureMore(m *ObligationsMeasure, enough func(*ObligationsMeasure) bool) error {
	m.Stopped = false
	return db.read(func() error {
		if m.Last == ^uint64(0) {
			return nil
		}
		lower := AppendArchiveKey(nil, m.Last+1)
		it, done := db.scanIter(cfIndex, lower, []byte{IndexArchive + 1})
		defer done()
		for it.Seek(lower); it.Valid(); it.Next() {
			seq, err := ParseArchiveKey(it.Key().Data())
			if err != nil {
				return err
			}
			size, err := ParseIndexValue(it.Value().Data())
			if err != nil {
				return fmt.Errorf("archive obligation %d: %w", seq, err)
			}
			if m.Count == 0 {
				m.First = seq
				h, err := db.getCF(cfHooks, AppendHookKey(nil, seq))
				if err != nil {
					return err
				}
				if _, at, err := HookHead(h); err == nil {
					m.FirstReceivedAt = at
				}
				m.FirstBytes = len(h)
			}
			m.Count++
			m.Charged += int64(size)
			m.Last = seq
			if enough(m) {
				m.Stopped = true
				break
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("cannot measure the archive obligations: %w", err)
		}
		return nil
	})
}

// scanIter is boundedIter for the compactor's one-pass scans: the blocks it reads are not put into the block
// cache, so packing a segment (up to roll_bytes of hooks no one else reads again) does not evict the index,
// filter and dedupe blocks the ingest commits look up.
func (db *DB) scanIter(cf int, lower, upper []byte) (*grocksdb.Iterator, func()) {
	return db.rangeIter(cf, lower, upper, false)
}

// ArchivedHook names one hook of a segment being catalogued and where its frame is in the segment object.
type ArchivedHook struct {
	Seq    uint64
	ID     [16]byte
	Offset int64
	Length uint32
}

// FrameLocation is where one hook's frame is in its segment object.
type FrameLocation struct {
	Offset int64
	Length uint32
}

const archivedIDValueLen = 8 + 8 + 4

// CatalogueSegment catalogues segment e (none when e is nil: every obligation was in missing) with the id keys
// of hooks, in unsynced batches (see the comment at the top of the file); then deletes the archive obligations
// of hooks and of missing (obligations whose hook was gone) and every hook whose obligation was the last thing
// holding it (no delivery row left, dead rows included), with m:archive_pending, in further batches. An
// obligation already gone (a second call for the same segment) is skipped, so the call is idempotent. The
// clearing batches are built and written under cmu, so a dispatch outcome deciding whether to delete the same
// hook sees the obligation or its absence, never half of it. pace (nil: none) is called between two batches,
// with no lock held: the compactor's pacing. It returns how many hooks it deleted.
func (db *DB) CatalogueSegment(e *SegmentEntry, hooks []ArchivedHook, missing []uint64,
	pace func()) (deleted int, err error) {
	if len(hooks) == 0 && len(missing) == 0 {
		return 0, nil
	}
	if pace == nil {
		pace = func() {}
	}
	if e != nil {
		if err := db.putCatalogue(e, hooks, pace); err != nil {
			return 0, err
		}
	}
	items := make([]clearItem, 0, len(hooks)+len(missing))
	for _, h := range hooks {
		items = append(items, clearItem{seq: h.Seq, hook: true})
	}
	for _, m := range missing {
		items = append(items, clearItem{seq: m})
	}
	slices.SortFunc(items, func(a, b clearItem) int { return cmp.Compare(a.seq, b.seq) })
	// The clearing goes in chunks, each its own batch under cmu, so an ingest commit waits for at most one chunk
	// (a crash between two leaves the later obligations, whose hooks are archived again).
	for len(items) > 0 {
		pace()
		n := min(len(items), clearChunk)
		d, err := db.clearObligations(items[:n])
		deleted += d
		if err != nil {
			return deleted, err
		}
		items = items[n:]
	}
	return deleted, nil
}

const (
	// clearChunk is how many obligations one clearing batch deletes.
	clearChunk = 512
	// catalogueChunk is how many 'I' keys one catalogue batch writes.
	catalogueChunk = 512
)

type clearItem struct {
	seq  uint64
	hook bool // archived (its hook may go), not missing
}

// clearObligations deletes the obligations of items (in seq order) that are still there, and the hook of every
// archived item that has no delivery row left, in one unsynced batch under cmu.
//
// The batch is built for the memtable, where its cost lies: the obligations go as one range deletion over
// [lo, hi] when every obligation in that range is one of items (always, unless the store holds obligations the
// compactor did not read; then one deletion each), a run of minDeleteRun or more consecutive hooks as one range
// deletion, and the rest as point deletions grouped by key range in key order (so each insert starts from the
// previous one's place in the skip list); a claim marker is deleted only where one exists.
func (db *DB) clearObligations(items []clearItem) (deleted int, err error) {
	lo, hi := items[0].seq, items[len(items)-1].seq
	db.cmu.Lock()
	defer db.cmu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return 0, ErrClosed
	}
	// Which of the seqs still hold an obligation, a delivery row or a claim marker: range scans over [lo, hi]
	// under cmu (so no outcome settles a row of these hooks meanwhile, nor a marker is written), not a point
	// read per hook.
	sc := &db.clear
	if sc.held, err = db.seqsWithKeysLocked(sc.held[:0], cfIndex, AppendArchiveKey(nil, lo), AppendArchiveKey(nil, hi+1), 1); err != nil {
		return 0, err
	}
	if err := db.deliveriesInLocked(sc, lo, hi); err != nil {
		return 0, err
	}
	if sc.claims, err = db.seqsWithKeysLocked(sc.claims[:0], cfIndex, AppendClaimKey(nil, lo), AppendClaimKey(nil, hi+1), 1); err != nil {
		return 0, err
	}
	db.ed.reset()
	// One walk over items beside the sorted scans: which obligations go, and which hooks with them.
	sc.cleared, sc.hooks = sc.cleared[:0], sc.hooks[:0]
	held, rows := sc.held, sc.rows
	for _, it := range items {
		for len(held) > 0 && held[0] < it.seq {
			held = held[1:]
		}
		if len(held) == 0 || held[0] != it.seq {
			continue
		}
		sc.cleared = append(sc.cleared, it.seq)
		for len(rows) > 0 && rows[0] < it.seq {
			rows = rows[1:]
		}
		if it.hook && (len(rows) == 0 || rows[0] != it.seq) {
			sc.hooks = append(sc.hooks, it.seq)
		}
	}
	if len(sc.cleared) == 0 {
		return 0, nil
	}
	wb := db.owb
	wb.Clear()
	index := db.cfs[cfIndex]
	if len(sc.cleared) == len(sc.held) && hi < ^uint64(0) {
		// Every obligation in [lo, hi] goes: one range deletion (archive keys are 'a' and exactly 8 bytes).
		wb.DeleteRangeCF(index, AppendArchiveKey(db.okey[:0], lo), AppendArchiveKey(db.oval[:0], hi+1))
	} else {
		for _, seq := range sc.cleared {
			db.okey = AppendArchiveKey(db.okey[:0], seq)
			wb.DeleteCF(index, db.okey)
		}
	}
	db.ed.archive -= int64(len(sc.cleared))
	db.deleteSeqRunsLocked(wb, db.cfs[cfHooks], sc.hooks, AppendHookKey)
	db.deleteRecordsLocked(wb, sc.hooks, sc.records)
	// The claim markers go with their hooks (both lists sorted).
	claims, hooks := sc.claims, sc.hooks
	for _, seq := range claims {
		for len(hooks) > 0 && hooks[0] < seq {
			hooks = hooks[1:]
		}
		if len(hooks) > 0 && hooks[0] == seq {
			db.okey = AppendClaimKey(db.okey[:0], seq)
			wb.DeleteCF(index, db.okey)
		}
	}
	db.putCountersLocked(wb)
	if err := db.rdb.Write(db.woAsync, wb); err != nil {
		db.ed.reset()
		return 0, &WriteError{Class: classify(err), Err: err}
	}
	db.applyEditsLocked(nil)
	for _, seq := range sc.hooks {
		delete(db.markers, seq)
	}
	return len(sc.hooks), nil
}

// minDeleteRun is the shortest run of consecutive seqs deleted as one range deletion: below it point deletions
// cost the memtable less than the reads that would have to step over one more range tombstone.
const minDeleteRun = 32

// deleteSeqRunsLocked adds to wb the deletion of the keys of seqs (sorted) in cf, whose keys are the seq alone
// (appendKey): a run of at least minDeleteRun consecutive seqs as one range deletion, the rest one by one.
func (db *DB) deleteSeqRunsLocked(wb *grocksdb.WriteBatch, cf *grocksdb.ColumnFamilyHandle, seqs []uint64,
	appendKey func([]byte, uint64) []byte) {
	for i := 0; i < len(seqs); {
		j := i + 1
		for j < len(seqs) && seqs[j] == seqs[j-1]+1 {
			j++
		}
		if j-i >= minDeleteRun {
			wb.DeleteRangeCF(cf, appendKey(db.okey[:0], seqs[i]), appendKey(db.oval[:0], seqs[j-1]+1))
		} else {
			for _, seq := range seqs[i:j] {
				db.okey = appendKey(db.okey[:0], seq)
				wb.DeleteCF(cf, db.okey)
			}
		}
		i = j
	}
}

// deleteRecordsLocked adds to wb the deletion of the delivered records of the hooks seqs (sorted), which hold
// no delivery row: the records of a run of consecutive seqs as one range deletion over the run's keys of the
// deliveries CF (nothing but records is left there) when they are minDeleteRun or more, else one by one.
// records are the delivered records of the range scanned (deliveriesInLocked), in key order.
func (db *DB) deleteRecordsLocked(wb *grocksdb.WriteBatch, seqs []uint64, records []DeliveryKey) {
	dels := db.cfs[cfDeliveries]
	for i := 0; i < len(seqs) && len(records) > 0; {
		j := i + 1
		for j < len(seqs) && seqs[j] == seqs[j-1]+1 {
			j++
		}
		first, last := seqs[i], seqs[j-1]
		for len(records) > 0 && records[0].Seq < first {
			records = records[1:]
		}
		n := 0
		for n < len(records) && records[n].Seq <= last {
			n++
		}
		if n >= minDeleteRun {
			wb.DeleteRangeCF(dels, AppendHookKey(db.okey[:0], first), AppendHookKey(db.oval[:0], last+1))
		} else {
			for _, k := range records[:n] {
				wb.DeleteCF(dels, k.AppendDelivered(db.okey[:0]))
			}
		}
		records = records[n:]
		i = j
	}
}

// deliveriesInLocked fills sc.rows with the seqs in [lo, hi] holding a delivery row and sc.records with the
// delivered records there, in key order: one scan of the deliveries CF under cmu.
func (db *DB) deliveriesInLocked(sc *clearScratch, lo, hi uint64) error {
	sc.rows, sc.records = sc.rows[:0], sc.records[:0]
	db.wroUpper = AppendHookKey(db.wroUpper[:0], hi+1)
	db.wro.SetIterateUpperBound(db.wroUpper)
	it := db.rdb.NewIteratorCF(db.wro, db.cfs[cfDeliveries])
	defer it.Close()
	for it.Seek(AppendHookKey(nil, lo)); it.Valid(); it.Next() {
		k := it.Key().Data()
		if dk, ok := deliveredKeyOf(k); ok {
			sc.records = append(sc.records, dk)
			continue
		}
		// Anything else under a seq holds its hook, as a row does (an unparsable key is not known to be none).
		if len(k) < HookKeyLen {
			return fmt.Errorf("%s key %x: %w", cfNames[cfDeliveries], k, ErrBadKey)
		}
		if seq := binary.BigEndian.Uint64(k); len(sc.rows) == 0 || sc.rows[len(sc.rows)-1] != seq {
			sc.rows = append(sc.rows, seq)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("cannot scan %s: %w", cfNames[cfDeliveries], err)
	}
	return nil
}

// clearScratch is clearObligations' reused scratch (under cmu).
type clearScratch struct {
	held, rows, claims []uint64      // seqs holding an obligation, a delivery row, a claim marker
	cleared, hooks     []uint64      // the obligations the batch deletes, the hooks it deletes
	records            []DeliveryKey // the delivered records in the range
}

// putCatalogue writes e's row and its 'D' key in one batch, then one 'I' key per hook, catalogueChunk a batch with
// pace before each; none is synced: they are ordered before the clearing batches in the WAL, which is all the
// safety needs (the comment at the top of the file). The 'I' keys go in id order, so each memtable insert starts
// from the previous one's place instead of a fresh descent.
func (db *DB) putCatalogue(e *SegmentEntry, hooks []ArchivedHook, pace func()) error {
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	// Each batch is built and written with the store open: the column family handles go with a close.
	write := func(fill func(archive *grocksdb.ColumnFamilyHandle)) error {
		defer wb.Clear()
		return db.read(func() error {
			fill(db.cfs[cfArchive])
			if err := db.rdb.Write(db.woAsync, wb); err != nil {
				return &WriteError{Class: classify(err), Err: err}
			}
			return nil
		})
	}
	ids := make([]byte, 0, 16*len(hooks))
	for _, h := range hooks {
		ids = append(ids, h.ID[:]...)
	}
	if err := write(func(archive *grocksdb.ColumnFamilyHandle) {
		wb.PutCF(archive, appendArchivedIDsKey(nil, e.FirstSeq), ids)
		wb.PutCF(archive, appendSegmentKey(nil, e.FirstSeq), AppendSegmentEntry(nil, e))
	}); err != nil {
		return err
	}
	order := make([]int32, len(hooks))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(hooks[a].ID[:], hooks[b].ID[:]) })
	key := make([]byte, 0, 1+16)
	val := make([]byte, 0, archivedIDValueLen)
	for len(order) > 0 {
		pace()
		n := min(len(order), catalogueChunk)
		if err := write(func(archive *grocksdb.ColumnFamilyHandle) {
			for _, i := range order[:n] {
				h := &hooks[i]
				val = binary.BigEndian.AppendUint64(val[:0], e.FirstSeq)
				val = binary.BigEndian.AppendUint64(val, uint64(h.Offset))
				val = binary.BigEndian.AppendUint32(val, h.Length)
				key = appendArchivedIDKey(key[:0], h.ID)
				wb.PutCF(archive, key, val)
			}
		}); err != nil {
			return err
		}
		order = order[n:]
	}
	return nil
}

// seqsWithKeysLocked appends to dst the seqs of the keys of cf in [lower, upper), in key order, each read as the
// 8 bytes after skip bytes of prefix (under cmu, whose read options it uses); a seq is appended once however
// many keys carry it.
func (db *DB) seqsWithKeysLocked(dst []uint64, cf int, lower, upper []byte, skip int) ([]uint64, error) {
	db.wroUpper = append(db.wroUpper[:0], upper...)
	db.wro.SetIterateUpperBound(db.wroUpper)
	it := db.rdb.NewIteratorCF(db.wro, db.cfs[cf])
	defer it.Close()
	start := len(dst)
	for it.Seek(lower); it.Valid(); it.Next() {
		k := it.Key().Data()
		if len(k) < skip+8 {
			return dst, fmt.Errorf("%s key %x: %w", cfNames[cf], k, ErrBadKey)
		}
		seq := binary.BigEndian.Uint64(k[skip:])
		if len(dst) == start || dst[len(dst)-1] != seq {
			dst = append(dst, seq)
		}
	}
	if err := it.Err(); err != nil {
		return dst, fmt.Errorf("cannot scan %s: %w", cfNames[cf], err)
	}
	return dst, nil
}

// ArchivedSegment returns the catalogue row of the segment holding the hook with id and where the hook's frame
// is in it (ErrNotFound when no catalogued segment holds it).
func (db *DB) ArchivedSegment(id [16]byte) (SegmentEntry, FrameLocation, error) {
	var e SegmentEntry
	var loc FrameLocation
	err := db.read(func() error {
		v, err := db.getCF(cfArchive, appendArchivedIDKey(nil, id))
		if err != nil {
			return err
		}
		if v == nil {
			return fmt.Errorf("archived hook %x: %w", id, ErrNotFound)
		}
		if len(v) != archivedIDValueLen {
			return fmt.Errorf("archived hook %x: %w", id, ErrCorruptValue)
		}
		first := binary.BigEndian.Uint64(v)
		loc = FrameLocation{Offset: int64(binary.BigEndian.Uint64(v[8:])), Length: binary.BigEndian.Uint32(v[16:])}
		if loc.Offset < 0 {
			return fmt.Errorf("archived hook %x at offset %d: %w", id, loc.Offset, ErrCorruptValue)
		}
		row, err := db.getCF(cfArchive, appendSegmentKey(nil, first))
		if err != nil {
			return err
		}
		if row == nil {
			return fmt.Errorf("segment %d of archived hook %x: %w", first, id, ErrNotFound)
		}
		e, err = DecodeSegmentEntry(row)
		if err != nil {
			return fmt.Errorf("segment %d: %w", first, err)
		}
		return nil
	})
	return e, loc, err
}

// Segments calls fn for every catalogued segment in first-seq order whose received_at range meets [from, to]
// (unix ms; to 0 = no upper bound), stopping at fn's first error. fn must not call Close.
func (db *DB) Segments(from, to int64, fn func(SegmentEntry) error) error {
	return db.read(func() error {
		return db.scan(cfArchive, []byte{archiveSegment}, func(k, v []byte) error {
			e, err := DecodeSegmentEntry(v)
			if err != nil {
				return fmt.Errorf("segment row %x: %w", k, err)
			}
			if e.MaxReceivedAt < from || (to > 0 && e.MinReceivedAt > to) {
				return nil
			}
			return fn(e)
		})
	})
}

// LastArchivedSeq is the last seq of the newest catalogued segment (0 when there is none).
func (db *DB) LastArchivedSeq() (uint64, error) {
	var last uint64
	err := db.read(func() error {
		it, done := db.boundedIter(cfArchive, []byte{archiveSegment}, []byte{archiveSegment + 1})
		defer done()
		it.SeekToLast()
		if it.Valid() {
			e, err := DecodeSegmentEntry(it.Value().Data())
			if err != nil {
				return err
			}
			last = e.LastSeq
		}
		return it.Err()
	})
	return last, err
}

// DeleteSegment deletes the catalogue row of the segment starting at first and its id keys, in one synced
// batch. Deleting a row that is not there is not an error.
func (db *DB) DeleteSegment(first uint64) error {
	return db.read(func() error {
		archive := db.cfs[cfArchive]
		idsKey := appendArchivedIDsKey(nil, first)
		ids, err := db.getCF(cfArchive, idsKey)
		if err != nil {
			return err
		}
		if len(ids)%16 != 0 {
			return fmt.Errorf("ids of segment %d: %d bytes: %w", first, len(ids), ErrCorruptValue)
		}
		wb := grocksdb.NewWriteBatch()
		defer wb.Destroy()
		for i := 0; i < len(ids); i += 16 {
			// A hook archived again later (its clearing batch was lost in a crash) points at the newer segment:
			// its key stays.
			k := appendArchivedIDKey(nil, [16]byte(ids[i:i+16]))
			v, err := db.getCF(cfArchive, k)
			if err != nil {
				return err
			}
			if len(v) >= 8 && binary.BigEndian.Uint64(v) == first {
				wb.DeleteCF(archive, k)
			}
		}
		wb.DeleteCF(archive, idsKey)
		wb.DeleteCF(archive, appendSegmentKey(nil, first))
		if err := db.rdb.Write(db.wo, wb); err != nil {
			return &WriteError{Class: classify(err), Err: err}
		}
		return nil
	})
}

// OpenReadOnly opens the store in dir for reading only (the archive catalogue, hooks): it takes no lock, so it
// works beside the node that has the store open, and sees the store as it was when it opened. Writes through it
// fail; nothing is migrated or initialised. A directory holding no store is an *OpenError.
func OpenReadOnly(dir string, log zerolog.Logger) (*DB, error) {
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		return nil, &OpenError{Path: dir, Err: fmt.Errorf("no store here: %w", err)}
	}
	db := &DB{dir: dir, log: log, ords: make(map[string]uint32), notify: make(chan struct{}, 1), anotify: make(chan struct{}, 1), ed: newEditSet()}
	db.cache = grocksdb.NewLRUCache(8 << 20)
	db.bbto = grocksdb.NewDefaultBlockBasedTableOptions()
	db.bbto.SetBlockCache(db.cache)
	o := grocksdb.NewDefaultOptions()
	db.opts = o
	o.SetParanoidChecks(true)
	o.SetWALRecoveryMode(grocksdb.TolerateCorruptedTailRecordsRecovery)
	o.SetBlockBasedTableFactory(db.bbto)
	cfOpts := make([]*grocksdb.Options, cfCount)
	for i := range cfOpts {
		cfOpts[i] = o
	}
	rdb, handles, err := grocksdb.OpenDbForReadOnlyColumnFamilies(o, dir, cfNames[:], cfOpts, false)
	if err != nil {
		db.release()
		return nil, &OpenError{Path: dir, Err: fmt.Errorf("cannot open rocksdb read-only: %w", err)}
	}
	db.rdb = rdb
	copy(db.cfs[:], handles)
	db.ro = grocksdb.NewDefaultReadOptions()
	db.ro.SetVerifyChecksums(true)
	db.closed = false
	return db, nil
}
