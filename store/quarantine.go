package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/linxGnu/grocksdb"
)

// The quarantine pen (seed "Quarantine" row, inventory E.8): hooks whose signature did not verify, held until a
// quarantine replay job re-verifies them against their source's current verifier or an operator purges them.
//
//	quarantine CF  's', received_at:64, id:128 → summary: what GET /v1/quarantine lists (no headers, no body)
//	               'b', received_at:64, id:128 → the whole entry: method, path, reason and the hook
//	default CF     m:quarantine_bytes, m:quarantine_count → the bytes (QuarantineEntrySize) and entries held
//
// Every call that changes the pen writes both keys of each entry it adds or deletes and the pen's new absolute
// counters in one synced batch, so the counters on disk always match the entries and a restart reads them in
// O(1). The bytes are the entries' stored lengths (QuarantineEntrySize), what quarantine.max_bytes bounds. Keys
// sort by receive time: a listing walks them backwards (newest first), a purge forwards (oldest first). Nothing
// evicts an entry: it leaves the pen only by PurgeQuarantine, SweepQuarantine (quarantine.retention_seconds) or ReleaseQuarantine. The usage of each
// source and tenant, which the edge's shares bound, is kept in memory and rebuilt from the summaries at open.

// QuarantineEntry is one held hook with the request it came in.
type QuarantineEntry struct {
	Hook   Hook // ID, ReceivedAt, Tenant, Source, ContentType, Headers, Body
	Method string
	Path   string
	Reason string // why verification failed, e.g. "no_match"
}

// QuarantineSummary is what the pen lists of an entry.
type QuarantineSummary struct {
	ID                     [16]byte
	Source, Tenant, Reason string
	ReceivedAt             int64 // unix ms
	// Size is what the entry costs the pen: its stored length (body, headers, request line, reason), so a flood
	// of empty bodies with large heads fills the budget as surely as large bodies. Entries written before this
	// rule hold their body size; the counters were summed from the same values, so they stay exact.
	Size uint32
}

// Pen key kinds and lengths. An entry is named by its receive time and id (penIDLen bytes after the kind).
const (
	penSummary byte = 's'
	penBody    byte = 'b'
	penIDLen        = 8 + 16
	penKeyLen       = 1 + penIDLen
)

// undecodablePenReason is the Reason listed for an entry whose summary cannot be decoded: it is listed (and
// purged by a purge without a source filter) rather than hidden.
const undecodablePenReason = "undecodable quarantine summary"

func appendPenKey(dst []byte, kind byte, receivedAt int64, id [16]byte) []byte {
	dst = append(dst, kind)
	dst = binary.BigEndian.AppendUint64(dst, uint64(receivedAt))
	return append(dst, id[:]...)
}

func parsePenKey(b []byte) (kind byte, receivedAt int64, id [16]byte, err error) {
	if len(b) != penKeyLen || (b[0] != penSummary && b[0] != penBody) || int64(binary.BigEndian.Uint64(b[1:])) < 0 {
		return 0, 0, id, fmt.Errorf("quarantine key %x: %w", b, ErrBadKey)
	}
	return b[0], int64(binary.BigEndian.Uint64(b[1:])), [16]byte(b[9:]), nil
}

const penVersion = 1

// Summary encoding (version 1): version:8 id:128 received_at:64(BE) source tenant reason size:32(BE), strings
// uvarint length + bytes. The value repeats its key's id and time so a value under the wrong key is caught.

// AppendQuarantineSummary appends the encoding of s to dst.
func AppendQuarantineSummary(dst []byte, s *QuarantineSummary) []byte {
	dst = append(dst, penVersion)
	dst = append(dst, s.ID[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.ReceivedAt))
	dst = appendStr(dst, s.Source)
	dst = appendStr(dst, s.Tenant)
	dst = appendStr(dst, s.Reason)
	return binary.BigEndian.AppendUint32(dst, s.Size)
}

// DecodeQuarantineSummary decodes a summary value; the result shares no memory with b. It never panics: any
// malformed input is ErrCorruptValue.
func DecodeQuarantineSummary(b []byte) (QuarantineSummary, error) {
	var s QuarantineSummary
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != penVersion {
		return QuarantineSummary{}, fmt.Errorf("quarantine summary version %d: %w", v, ErrCorruptValue)
	}
	copy(s.ID[:], d.fixed(16))
	s.ReceivedAt = int64(d.uint64())
	s.Source = d.str()
	s.Tenant = d.str()
	s.Reason = d.str()
	s.Size = d.uint32()
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return QuarantineSummary{}, fmt.Errorf("cannot decode quarantine summary: %w", d.err)
	}
	return s, nil
}

// Entry encoding (version 1): version:8 method path reason hook, the strings uvarint length + bytes and the hook
// AppendHook's encoding up to the end of the value.

// QuarantineEntrySize is the length of e's encoding: what it costs the pen's byte budgets (quarantine.max_bytes
// and its shares), which the edge reserves before the write and the store counts.
func QuarantineEntrySize(e *QuarantineEntry) int {
	return 1 + strSize(len(e.Method)) + strSize(len(e.Path)) + strSize(len(e.Reason)) + HookSize(&e.Hook)
}

// AppendQuarantineEntry appends the encoding of e to dst, allocating at most once.
func AppendQuarantineEntry(dst []byte, e *QuarantineEntry) []byte {
	need := QuarantineEntrySize(e)
	if cap(dst)-len(dst) < need {
		grown := make([]byte, len(dst), len(dst)+need)
		copy(grown, dst)
		dst = grown
	}
	dst = append(dst, penVersion)
	dst = appendStr(dst, e.Method)
	dst = appendStr(dst, e.Path)
	dst = appendStr(dst, e.Reason)
	return AppendHook(dst, &e.Hook)
}

// DecodeQuarantineEntry decodes an entry value; the result shares no memory with b (which may point into C
// memory freed right after). It never panics: any malformed input is ErrCorruptValue.
func DecodeQuarantineEntry(b []byte) (QuarantineEntry, error) {
	var e QuarantineEntry
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != penVersion {
		return QuarantineEntry{}, fmt.Errorf("quarantine entry version %d: %w", v, ErrCorruptValue)
	}
	e.Method = d.str()
	e.Path = d.str()
	e.Reason = d.str()
	if d.err != nil {
		return QuarantineEntry{}, fmt.Errorf("cannot decode quarantine entry: %w", d.err)
	}
	h, err := DecodeHook(d.b)
	if err != nil {
		return QuarantineEntry{}, fmt.Errorf("cannot decode quarantine entry: %w", err)
	}
	e.Hook = h
	return e, nil
}

func summaryOf(e *QuarantineEntry) QuarantineSummary {
	return QuarantineSummary{ID: e.Hook.ID, Source: e.Hook.Source, Tenant: e.Hook.Tenant, Reason: e.Reason,
		ReceivedAt: e.Hook.ReceivedAt, Size: uint32(QuarantineEntrySize(e))}
}

// penSummaryAt reads the summary stored under key k. A value that cannot be decoded, or names another entry than
// its key, gives the key's id and time with the undecodable reason and ok false; a malformed key is an error.
func penSummaryAt(k, v []byte) (s QuarantineSummary, ok bool, err error) {
	kind, at, id, err := parsePenKey(k)
	if err == nil && kind != penSummary {
		err = fmt.Errorf("quarantine key %x among the summaries: %w", k, ErrBadKey)
	}
	if err != nil {
		return s, false, err
	}
	s, err = DecodeQuarantineSummary(v)
	if err != nil || s.ID != id || s.ReceivedAt != at {
		return QuarantineSummary{ID: id, ReceivedAt: at, Reason: undecodablePenReason}, false, nil
	}
	return s, true, nil
}

// penCounts is the pen's size as persisted at m:quarantine_bytes and m:quarantine_count.
type penCounts struct{ bytes, count int64 }

// minus is c without n entries of b bytes. Never negative; an empty pen holds no bytes, so bytes that could not
// be told (an undecodable summary's, purged) stop counting when the pen empties.
func (c penCounts) minus(n, b int64) penCounts {
	c.count = max(0, c.count-n)
	c.bytes = max(0, c.bytes-b)
	if c.count == 0 {
		c.bytes = 0
	}
	return c
}

// putPenCounts adds the pen's new absolute counters to wb (the batch copies the values).
func (db *DB) putPenCounts(wb *grocksdb.WriteBatch, c penCounts) {
	var b [8]byte
	meta := db.cfs[cfDefault]
	binary.BigEndian.PutUint64(b[:], uint64(c.bytes))
	wb.PutCF(meta, []byte(metaPenBytes), b[:])
	binary.BigEndian.PutUint64(b[:], uint64(c.count))
	wb.PutCF(meta, []byte(metaPenCount), b[:])
}

// penChange is one entry a pen batch adds (n = 1) or deletes (n = -1), for the per-source and per-tenant usage.
type penChange struct {
	source, tenant string
	n, bytes       int64
}

// penUsage is the pen's bytes and entries per source and per tenant, in memory only: Open rebuilds it from the
// summaries (loadPenUsage), so it always matches the entries on disk without counters of its own to keep.
type penUsage struct {
	source, tenant map[string]penCounts
}

func (u *penUsage) apply(ch penChange) {
	for _, m := range [...]struct {
		m   map[string]penCounts
		key string
	}{{u.source, ch.source}, {u.tenant, ch.tenant}} {
		c := m.m[m.key]
		if ch.n > 0 {
			c.count += ch.n
			c.bytes += ch.bytes
		} else {
			c = c.minus(-ch.n, ch.bytes)
		}
		if c.count == 0 {
			delete(m.m, m.key)
		} else {
			m.m[m.key] = c
		}
	}
}

// setPenLocked makes c the in-memory pen counters, once the batch carrying them was written (qmu held), and
// applies the batch's per-source and per-tenant changes (db.qchg, which it empties).
func (db *DB) setPenLocked(c penCounts) {
	db.stateMu.Lock()
	db.qs.pen = c
	for _, ch := range db.qchg {
		db.qs.penUse.apply(ch)
	}
	if c.count == 0 {
		// An empty pen holds nothing for anyone (bytes an undecodable entry hid included).
		clear(db.qs.penUse.source)
		clear(db.qs.penUse.tenant)
	}
	db.stateMu.Unlock()
	db.qchg = db.qchg[:0]
}

// loadPenUsage rebuilds the per-source and per-tenant usage from the pen's summaries at open: O(entries), and
// exact by construction. An undecodable summary counts for no one (its bytes stay in the node's total).
func (db *DB) loadPenUsage() (penUsage, error) {
	u := penUsage{source: map[string]penCounts{}, tenant: map[string]penCounts{}}
	err := db.scan(cfQuarantine, []byte{penSummary}, func(k, v []byte) error {
		s, ok, err := penSummaryAt(k, v)
		if err != nil {
			return err
		}
		if ok {
			u.apply(penChange{source: s.Source, tenant: s.Tenant, n: 1, bytes: int64(s.Size)})
		}
		return nil
	})
	return u, err
}

// loadPenCounts reads the pen counters at open, and refuses a store whose pen contradicts them: entries with a
// count of zero, or a count with no entry, can only be damage.
func (db *DB) loadPenCounts() (penCounts, error) {
	var c penCounts
	for _, f := range [...]struct {
		key string
		dst *int64
	}{{metaPenBytes, &c.bytes}, {metaPenCount, &c.count}} {
		v, err := db.getCF(cfDefault, []byte(f.key))
		if err != nil {
			return c, err
		}
		switch {
		case v == nil:
		case len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < 0:
			return c, fmt.Errorf("%s = %x: want a non-negative 8-byte count", f.key, v)
		default:
			*f.dst = int64(binary.BigEndian.Uint64(v))
		}
	}
	empty, err := db.cfEmpty(cfQuarantine)
	if err != nil {
		return c, err
	}
	if empty != (c.count == 0) {
		return c, fmt.Errorf("%s = %d but the quarantine pen is empty: %t", metaPenCount, c.count, empty)
	}
	return c, nil
}

// writePenLocked writes a pen batch synced and applies its counters (qmu and closeMu held).
func (db *DB) writePenLocked(wb *grocksdb.WriteBatch, next penCounts) error {
	if f := db.faults; f != nil && f.BeforeCommit != nil {
		if err := f.BeforeCommit(); err != nil {
			return &WriteError{Class: classify(err), Err: err}
		}
	}
	if err := db.rdb.Write(db.wo, wb); err != nil {
		return &WriteError{Class: classify(err), Err: err}
	}
	db.setPenLocked(next)
	return nil
}

// maxPenScratch bounds the encoding buffer a pen write keeps between calls, so one large body does not stay
// pinned for the life of the store.
const maxPenScratch = 1 << 20

// PutQuarantine writes entries to the pen in one synced batch (the pen's writer group-commits a tick's worth):
// both keys of every entry and the pen's new counters. It refuses the whole call with ErrQuarantineFull when the
// pen's bytes plus the entries' sizes would pass maxBytes (0: unlimited), and never evicts a held entry to
// make room; refusing single entries is the caller's job (it reserves bytes before queueing). An entry already
// held (same receive time and id, so the same hook) is skipped rather than counted twice. A failed write is a
// *WriteError with nothing written and the counters unchanged.
func (db *DB) PutQuarantine(entries []QuarantineEntry, maxBytes int64) error {
	for i := range entries {
		h := &entries[i].Hook
		if h.ReceivedAt < 0 {
			return fmt.Errorf("quarantine entry %x received at %d: %w", h.ID, h.ReceivedAt, ErrBadKey)
		}
		if n := QuarantineEntrySize(&entries[i]); uint64(n) > math.MaxUint32 {
			return fmt.Errorf("quarantine entry %x of %d bytes: %w", h.ID, n, ErrQuarantineFull)
		}
	}
	db.qmu.Lock()
	defer db.qmu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	defer func() {
		if len(db.qseen) > 0 {
			clear(db.qseen)
		}
		if cap(db.qval) > maxPenScratch {
			db.qval = nil
		}
	}()
	wb := db.qwb
	wb.Clear()
	db.qchg = db.qchg[:0]
	q := db.cfs[cfQuarantine]
	var add, n int64
	for i := range entries {
		e := &entries[i]
		db.qkey = appendPenKey(db.qkey[:0], penSummary, e.Hook.ReceivedAt, e.Hook.ID)
		name := [penIDLen]byte(db.qkey[1:])
		if _, dup := db.qseen[name]; dup {
			continue
		}
		held, err := db.existsCF(cfQuarantine, db.qkey)
		if err != nil {
			return err
		}
		if held {
			continue
		}
		db.qseen[name] = struct{}{}
		s := summaryOf(e)
		db.qval = AppendQuarantineSummary(db.qval[:0], &s)
		wb.PutCF(q, db.qkey, db.qval)
		db.qkey[0] = penBody
		db.qval = AppendQuarantineEntry(db.qval[:0], e)
		wb.PutCF(q, db.qkey, db.qval)
		add += int64(s.Size)
		n++
		db.qchg = append(db.qchg, penChange{source: e.Hook.Source, tenant: e.Hook.Tenant, n: 1, bytes: int64(s.Size)})
	}
	cur := db.qs.pen
	if maxBytes > 0 && cur.bytes+add > maxBytes {
		return fmt.Errorf("%d bytes held, %d more would pass %d: %w", cur.bytes, add, maxBytes, ErrQuarantineFull)
	}
	if n == 0 {
		return nil
	}
	next := penCounts{bytes: cur.bytes + add, count: cur.count + n}
	db.putPenCounts(wb, next)
	return db.writePenLocked(wb, next)
}

// QuarantineStats returns the bytes (QuarantineEntrySize) and the entries the pen holds, from memory: O(1). Zero after Close.
func (db *DB) QuarantineStats() (bytes, count int64) {
	if db.isClosed.Load() {
		return 0, 0
	}
	db.stateMu.Lock()
	defer db.stateMu.Unlock()
	return db.qs.pen.bytes, db.qs.pen.count
}

// QuarantineUsage returns the bytes (QuarantineEntrySize) the pen holds on the node, for source and for tenant, from memory: O(1).
// Zero after Close.
func (db *DB) QuarantineUsage(source, tenant string) (total, forSource, forTenant int64) {
	if db.isClosed.Load() {
		return 0, 0, 0
	}
	db.stateMu.Lock()
	defer db.stateMu.Unlock()
	return db.qs.pen.bytes, db.qs.penUse.source[source].bytes, db.qs.penUse.tenant[tenant].bytes
}

// SweepQuarantine deletes, oldest first, up to limit entries received more than retention before now, with the
// pen's counters, in one synced batch (PurgeQuarantine's rules). It returns how many it deleted and their bytes.
func (db *DB) SweepQuarantine(now time.Time, retention time.Duration, limit int) (n int, bytes int64, err error) {
	cutoff := now.Add(-retention).UnixMilli()
	if cutoff <= 0 {
		return 0, 0, nil // nothing can be that old (and 0 would mean "unbounded" to PurgeQuarantine)
	}
	return db.PurgeQuarantine("", [16]byte{}, 0, cutoff, limit)
}

// ListQuarantine returns up to limit summaries of source's entries ("" = every source), newest first. An entry
// whose summary cannot be decoded is listed (without a source filter only) with reason "undecodable quarantine
// summary". With a source filter it may walk the whole pen to fill limit.
func (db *DB) ListQuarantine(source string, limit int) ([]QuarantineSummary, error) {
	return db.ListQuarantinePage(source, nil, limit)
}

// PenCursor names a pen entry (its receive time and id): the page cursor of ListQuarantinePage.
type PenCursor struct {
	ReceivedAt int64
	ID         [16]byte
}

// ListQuarantinePage is ListQuarantine after before (nil = from the newest): the next page of a listing whose
// last entry was before, read by seeking to its key, so a deep page costs what the first does.
func (db *DB) ListQuarantinePage(source string, before *PenCursor, limit int) ([]QuarantineSummary, error) {
	var out []QuarantineSummary
	err := db.read(func() error {
		if limit <= 0 {
			return nil
		}
		upper := []byte{penSummary + 1}
		it, done := db.boundedIter(cfQuarantine, []byte{penSummary}, upper)
		defer done()
		if before != nil {
			at := appendPenKey(nil, penSummary, before.ReceivedAt, before.ID)
			it.SeekForPrev(at)
			if it.Valid() && bytes.Equal(it.Key().Data(), at) {
				it.Prev()
			}
		} else {
			it.SeekForPrev(upper)
		}
		for ; it.Valid() && len(out) < limit; it.Prev() {
			s, ok, err := penSummaryAt(it.Key().Data(), it.Value().Data())
			if err != nil {
				return err
			}
			if source != "" && (!ok || s.Source != source) {
				continue
			}
			out = append(out, s)
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("cannot scan the quarantine pen: %w", err)
		}
		return nil
	})
	return out, err
}

// GetQuarantine reads the whole entry received at receivedAt with id (ErrNotFound if the pen does not hold it).
func (db *DB) GetQuarantine(receivedAt int64, id [16]byte) (QuarantineEntry, error) {
	var e QuarantineEntry
	err := db.read(func() error {
		s, err := db.rdb.GetCF(db.ro, db.cfs[cfQuarantine], appendPenKey(nil, penBody, receivedAt, id))
		if err != nil {
			return fmt.Errorf("cannot read quarantine entry %x at %d: %w", id, receivedAt, err)
		}
		defer s.Free()
		if !s.Exists() {
			return fmt.Errorf("quarantine entry %x at %d: %w", id, receivedAt, ErrNotFound)
		}
		e, err = DecodeQuarantineEntry(s.Data())
		if err == nil && (e.Hook.ID != id || e.Hook.ReceivedAt != receivedAt) {
			err = fmt.Errorf("value of hook %x at %d: %w", e.Hook.ID, e.Hook.ReceivedAt, ErrCorruptValue)
		}
		if err != nil {
			e = QuarantineEntry{}
			return fmt.Errorf("quarantine entry %x at %d: %w", id, receivedAt, err)
		}
		return nil
	})
	return e, err
}

// PurgeQuarantine deletes, oldest first, up to limit entries matching every filter given: source ("" = any), id
// (zero = any), received at or after since and at or before until (unix ms; 0 = unbounded). It returns how many
// it deleted and their bytes, all deleted with the new counters in one synced batch. It reads the matches
// first without holding up pen writes, then deletes those still held: an entry released meanwhile is not counted.
// An entry whose summary cannot be decoded matches only a purge without a source filter.
func (db *DB) PurgeQuarantine(source string, id [16]byte, since, until int64, limit int) (n int, bytes int64,
	err error) {
	if limit <= 0 || (since > 0 && until > 0 && since > until) {
		return 0, 0, nil
	}
	type victim struct {
		key            [penKeyLen]byte
		size           uint32
		source, tenant string
		decoded        bool
	}
	var victims []victim
	err = db.read(func() error {
		lower := []byte{penSummary}
		if since > 0 {
			lower = binary.BigEndian.AppendUint64(lower, uint64(since))
		}
		upper := []byte{penSummary + 1}
		if until > 0 && until < math.MaxInt64 {
			upper = binary.BigEndian.AppendUint64([]byte{penSummary}, uint64(until)+1)
		}
		it, done := db.boundedIter(cfQuarantine, lower, upper)
		defer done()
		anyID := id == [16]byte{}
		for it.Seek(lower); it.Valid() && len(victims) < limit; it.Next() {
			k := it.Key().Data()
			if !anyID && (len(k) != penKeyLen || [16]byte(k[9:]) != id) {
				continue
			}
			s, ok, err := penSummaryAt(k, it.Value().Data())
			if err != nil {
				return err
			}
			if source != "" && (!ok || s.Source != source) {
				continue
			}
			victims = append(victims, victim{key: [penKeyLen]byte(k), size: s.Size, source: s.Source, tenant: s.Tenant,
				decoded: ok})
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("cannot scan the quarantine pen: %w", err)
		}
		return nil
	})
	if err != nil || len(victims) == 0 {
		return 0, 0, err
	}

	db.qmu.Lock()
	defer db.qmu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return 0, 0, ErrClosed
	}
	wb := db.qwb
	wb.Clear()
	db.qchg = db.qchg[:0]
	q := db.cfs[cfQuarantine]
	for i := range victims {
		v := &victims[i]
		held, err := db.existsCF(cfQuarantine, v.key[:])
		if err != nil {
			return 0, 0, err
		}
		if !held {
			continue // released or purged since the scan
		}
		wb.DeleteCF(q, v.key[:])
		v.key[0] = penBody
		wb.DeleteCF(q, v.key[:])
		n++
		bytes += int64(v.size)
		if v.decoded {
			db.qchg = append(db.qchg, penChange{source: v.source, tenant: v.tenant, n: -1, bytes: int64(v.size)})
		}
	}
	if n == 0 {
		return 0, 0, nil
	}
	next := db.qs.pen.minus(int64(n), bytes)
	db.putPenCounts(wb, next)
	if err := db.writePenLocked(wb, next); err != nil {
		return 0, 0, err
	}
	return n, bytes, nil
}

// penRelease names the pen entry a release deletes, and its bytes.
type penRelease struct {
	at             int64
	id             [16]byte
	size           uint32
	source, tenant string
}

// penReleaseLocked adds the deletion of rel's entry and the pen's new counters to the commit batch wb, and
// returns those counters (commitMu, cmu and qmu held: it uses the commit's scratch).
func (db *DB) penReleaseLocked(wb *grocksdb.WriteBatch, rel *penRelease) penCounts {
	q := db.cfs[cfQuarantine]
	db.key = appendPenKey(db.key[:0], penSummary, rel.at, rel.id)
	wb.DeleteCF(q, db.key)
	db.key[0] = penBody
	wb.DeleteCF(q, db.key)
	next := db.qs.pen.minus(1, int64(rel.size))
	db.putPenCounts(wb, next)
	db.qchg = append(db.qchg[:0], penChange{source: rel.source, tenant: rel.tenant, n: -1, bytes: int64(rel.size)})
	return next
}

// ReleaseQuarantine commits the held hook received at receivedAt with id exactly as CommitHooks would commit rec
// (the same outcome rules, dedupe included), keeping its original id (rec.ID must be id, else ErrBadKey), and
// deletes the pen entry, all in one synced batch. A duplicate outcome deletes the entry too (the event is stored
// already) and commits nothing; a refused one (ErrDedupeQuota) writes nothing and leaves the entry held. It
// returns rec's Outcome. ErrNotFound if the pen does not hold the entry (released or purged already); a failed
// write is a *WriteError with nothing written, the entry still held, and rec's seq burned.
func (db *DB) ReleaseQuarantine(receivedAt int64, id [16]byte, rec *Record) (Outcome, error) {
	if rec.ID != id {
		return Outcome{}, fmt.Errorf("release of quarantine entry %x with a record of id %x: %w", id, rec.ID,
			ErrBadKey)
	}
	defer db.lockEveryWriter()()
	if db.closed {
		return Outcome{}, ErrClosed
	}
	k := appendPenKey(nil, penSummary, receivedAt, id)
	v, err := db.getCF(cfQuarantine, k)
	if err != nil {
		return Outcome{}, err
	}
	if v == nil {
		return Outcome{}, fmt.Errorf("quarantine entry %x at %d: %w", id, receivedAt, ErrNotFound)
	}
	s, ok, err := penSummaryAt(k, v)
	if err == nil && !ok {
		err = fmt.Errorf("quarantine entry %x at %d: undecodable summary: %w", id, receivedAt, ErrCorruptValue)
	}
	if err != nil {
		return Outcome{}, err
	}
	rel := penRelease{at: receivedAt, id: id, size: s.Size, source: s.Source, tenant: s.Tenant}
	rec.Outcome = Outcome{}
	if _, err := db.commitLocked([]*Record{rec}, &rel); err != nil {
		rec.Outcome = Outcome{}
		return Outcome{}, err
	}
	return rec.Outcome, nil
}

// lockEveryWriter takes, in the one order every path uses, the locks of every writer (commits, dispatch
// outcomes, the pen) and the close lock, so nothing interleaves with the caller's read-then-write; it returns
// the unlock.
func (db *DB) lockEveryWriter() (unlock func()) {
	db.commitMu.Lock()
	db.cmu.Lock()
	db.qmu.Lock()
	db.closeMu.RLock()
	return func() {
		db.closeMu.RUnlock()
		db.qmu.Unlock()
		db.cmu.Unlock()
		db.commitMu.Unlock()
	}
}
