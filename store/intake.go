package store

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/linxGnu/grocksdb"
)

// Keys of the dual intake log (wal.type dual) in the default CF.
const (
	// metaIntakeOffset is the intake watermark (intake's encoding): every hook of this node below its seq is
	// accounted for in the store, and the log need only be read from its offset.
	metaIntakeOffset = "m:intake_offset"
	// intakePendingPrefix + seq (8 bytes, big-endian) holds the entry (AppendEntry) of a hook committed here
	// whose intake publish is not confirmed yet; it is written in the hook's own synced batch.
	intakePendingPrefix = "m:ip:"
)

// EntryVersion is the version byte of AppendEntry's encoding.
const EntryVersion = 1

// CommitExtra is what a dual commit adds to CommitHooks (CommitHooksWith).
type CommitExtra struct {
	// BeforeWrite, when set, is called once the records' outcomes are decided and just before the synced write,
	// with the locks held: it must not block (it starts the intake publish). It is not called when nothing is
	// written.
	BeforeWrite func(recs []*Record)
	// Pending writes an intake pending key (the record's entry) for every committed record, in the same batch.
	Pending bool
}

// CommitHooksWith is CommitHooks with the additions of a dual commit.
func (db *DB) CommitHooksWith(recs []*Record, x CommitExtra) (first uint64, err error) {
	return db.commitHooks(recs, x)
}

// addExtraLocked adds the dual commit's pending keys to wb and calls its BeforeWrite; commitLocked calls it just
// before the synced write.
func (db *DB) addExtraLocked(wb *grocksdb.WriteBatch, recs []*Record) {
	if db.extra.Pending {
		meta := db.cfs[cfDefault]
		for _, r := range recs {
			if r.Outcome.Status != OutcomeCommitted {
				continue
			}
			db.key = appendPendingKey(db.key[:0], r.Outcome.Seq)
			db.val = AppendEntry(db.val[:0], r, r.Outcome.Seq)
			wb.PutCF(meta, db.key, db.val)
		}
	}
	if db.extra.BeforeWrite != nil {
		db.extra.BeforeWrite(recs)
	}
}

func appendPendingKey(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, intakePendingPrefix...), seq)
}

// ApplyHooks commits hooks read back from the intake log, each with the seq it had when first committed (seqs[i]
// for recs[i]), in one synced batch. The rule that makes a replay idempotent: a record whose seq holds a hook
// already, or that repeats a seq earlier in recs, is skipped (applied[i] false) — so a duplicate or reordered
// log record changes nothing. An applied record gets its rows, dedupe key (unless a live one exists) and
// counters as CommitHooks writes them; m:next_seq moves past the highest applied seq.
func (db *DB) ApplyHooks(recs []*Record, seqs []uint64) (applied []bool, err error) {
	if len(recs) != len(seqs) {
		return nil, fmt.Errorf("store: apply hooks: %d records, %d seqs", len(recs), len(seqs))
	}
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	db.cmu.Lock()
	defer db.cmu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return nil, ErrClosed
	}
	applied = make([]bool, len(recs))
	at := max(time.Now().UnixMilli(), db.lastCommit)
	db.lastCommit = at
	wb := db.wb
	wb.Clear()
	db.ed.reset()
	db.newTenants = db.newTenants[:0]
	clear(db.seen)
	defer clear(db.seen)
	ordBefore := db.nextOrd
	next := db.nextSeq.Load()
	taken := map[uint64]bool{}
	n := 0
	for i, r := range recs {
		s := seqs[i]
		if s == 0 || taken[s] {
			continue
		}
		v, err := db.getCF(cfHooks, AppendHookKey(nil, s))
		if err != nil {
			db.ed.reset()
			return nil, err
		}
		if v != nil {
			continue
		}
		taken[s] = true
		if _, _, err := db.addRecordsLocked(wb, []*Record{r}, s, at, &freshTake{}); err != nil {
			db.ed.reset()
			return nil, err
		}
		if r.Outcome.Status != OutcomeCommitted {
			continue // its dedupe key is held by another hook: the first occurrence won here too
		}
		applied[i] = true
		n++
		next = max(next, s+1)
	}
	if n == 0 {
		db.ed.reset()
		return applied, nil
	}
	db.putSeqMetaLocked(wb, ordBefore, next)
	if err := db.rdb.Write(db.wo, wb); err != nil {
		db.ed.reset()
		return nil, &WriteError{Class: classify(err), Err: err}
	}
	for _, t := range db.newTenants {
		db.ords[t.tenant] = t.ord
	}
	db.applyEditsLocked(db.newTenants)
	db.wake()
	return applied, nil
}

// HasHook reports whether a hook is stored at seq.
func (db *DB) HasHook(seq uint64) (bool, error) {
	var ok bool
	err := db.read(func() error {
		v, err := db.getCF(cfHooks, AppendHookKey(nil, seq))
		ok = v != nil
		return err
	})
	return ok, err
}

// IntakeWatermark reads m:intake_offset (nil when none was written).
func (db *DB) IntakeWatermark() ([]byte, error) {
	var out []byte
	err := db.read(func() error {
		v, err := db.getCF(cfDefault, []byte(metaIntakeOffset))
		out = v
		return err
	})
	return out, err
}

// IntakeConfirmed writes the watermark wm (when not nil) and deletes the pending keys of seqs, in one write. It is
// not synced: a lost watermark only makes the next boot read more of the log, and a lost delete republishes a
// hook the log's readers then skip.
func (db *DB) IntakeConfirmed(wm []byte, seqs []uint64) error {
	return db.intakeWrite(wm, seqs, false)
}

// SyncIntakeWatermark is IntakeConfirmed, synced (the end of boot recovery).
func (db *DB) SyncIntakeWatermark(wm []byte, seqs []uint64) error {
	return db.intakeWrite(wm, seqs, true)
}

func (db *DB) intakeWrite(wm []byte, seqs []uint64, sync bool) error {
	return db.read(func() error {
		wb := grocksdb.NewWriteBatch()
		defer wb.Destroy()
		meta := db.cfs[cfDefault]
		if wm != nil {
			wb.PutCF(meta, []byte(metaIntakeOffset), wm)
		}
		for _, s := range seqs {
			wb.DeleteCF(meta, appendPendingKey(nil, s))
		}
		wo := db.woAsync
		if sync {
			wo = db.wo
		}
		if err := db.rdb.Write(wo, wb); err != nil {
			return &WriteError{Class: classify(err), Err: err}
		}
		return nil
	})
}

// ForEachIntakePending calls fn for every intake pending key in seq order with its decoded entry.
func (db *DB) ForEachIntakePending(fn func(seq uint64, r *Record) error) error {
	return db.read(func() error {
		return db.scan(cfDefault, []byte(intakePendingPrefix), func(k, v []byte) error {
			r, seq, err := DecodeEntry(v)
			if err != nil {
				return fmt.Errorf("intake pending key %x: %w", k, err)
			}
			return fn(seq, &r)
		})
	})
}

// AppendEntry appends the entry encoding (version 1, docs/intake.md) of r committed at seq: everything ApplyHooks
// needs to commit it again on another store.
func AppendEntry(dst []byte, r *Record, seq uint64) []byte {
	dst = append(dst, EntryVersion)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = append(dst, r.ID[:]...)
	dst = appendStr(dst, r.Tenant)
	dst = appendStr(dst, r.Source)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.ReceivedAt))
	dst = binary.BigEndian.AppendUint32(dst, r.Size)
	var flags byte
	if r.Archive {
		flags |= 1
	}
	dst = append(dst, flags)
	dst = appendStr(dst, r.DedupeKey)
	dst = binary.AppendUvarint(dst, uint64(r.DedupeTTL/time.Millisecond))
	dst = appendStr(dst, r.ReplayID)
	dst = binary.AppendUvarint(dst, uint64(len(r.Sinks)))
	for _, s := range r.Sinks {
		dst = binary.BigEndian.AppendUint16(dst, s.Index)
		dst = appendStr(dst, s.Type)
		var o byte
		if s.Ordered {
			o = 1
		}
		dst = append(dst, o)
	}
	return appendStr(dst, r.Value)
}

// DecodeEntry decodes AppendEntry's output; the record owns copies of every byte.
func DecodeEntry(b []byte) (r Record, seq uint64, err error) {
	d := decoder{b: b}
	defer func() {
		if d.err != nil {
			r, seq, err = Record{}, 0, d.err
		}
	}()
	if v := d.byte(); d.err == nil && v != EntryVersion {
		return Record{}, 0, fmt.Errorf("%w: intake entry version %d", ErrCorruptValue, v)
	}
	seq = d.uint64()
	copy(r.ID[:], d.fixed(16))
	r.Tenant = d.str()
	r.Source = d.str()
	r.ReceivedAt = int64(d.uint64())
	r.Size = d.uint32()
	r.Archive = d.byte()&1 != 0
	r.DedupeKey = d.str()
	r.DedupeTTL = time.Duration(d.uvarint()) * time.Millisecond
	r.ReplayID = d.str()
	n := d.uvarint()
	if d.err == nil && n > uint64(len(b)) {
		d.fail("sink count")
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		s := SinkBinding{Index: d.uint16(), Type: d.str()}
		s.Ordered = d.byte() == 1
		r.Sinks = append(r.Sinks, s)
	}
	r.Value = append([]byte(nil), d.bytes()...)
	if d.err == nil && len(d.b) > 0 {
		d.fail("trailing bytes")
	}
	return r, seq, nil
}
