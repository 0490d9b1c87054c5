package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/linxGnu/grocksdb"
)

// Claimed is one delivery row claimed by dispatch: its inflight key is in the index CF until an outcome
// (Complete, Reschedule, Bury) settles it or RecoverInflight makes it due again.
type Claimed struct {
	Seq   uint64
	Sink  uint16
	Ord   uint32
	Size  uint32
	DueAt int64       // the due time it was claimed at
	Row   DeliveryRow // the delivery row as it was when claimed
	// Last is the attempt just made, which Reschedule and Bury append to the row's history; Number 0 means
	// none (a row parked or buried without an attempt).
	Last Attempt
	// Hook is the row's hook, read with the claim so an attempt needs no read of its own; nil when it could not
	// be read then (the attempt reads it, and a hook that is really gone or damaged is dead-lettered there).
	// Rows of one hook claimed together share it: nothing may change it.
	Hook *Hook
	// sole is set when the claim saw no other key of the hook in the deliveries CF (no other row, no delivered
	// record): nothing adds one to a hook already committed, so its Complete deletes the hook (unless archived)
	// without walking its rows again. Unset means unknown.
	sole bool
}

// undecodableReason is the dead reason of a row whose delivery row cannot be decoded (inventory, GET /v1/dlq).
const undecodableReason = "undecodable delivery row"

// ClaimDue moves up to max rows of tenant ord due at or before now (and, when maxBytes > 0, while the claimed
// sizes stay within maxBytes; always at least one row) from due to inflight in one non-synced batch, and
// appends them to dst with their decoded rows and hooks, in due-key order. It costs one write and a walk of
// three iterators, whatever the backlog: the due keys from the tenant's head (past the tombstones of earlier
// claims), the delivery rows and the hooks, which a page mostly meets in key order, so a Next replaces a point
// read per row (a row out of step costs a seek). The hooks are read after the write, without cmu, so an
// ingest commit never waits for them: a claimed row's hook stays until the row is settled.
//
// A due key whose delivery row is missing is deleted and skipped; one whose row cannot be decoded is moved to
// the dead index (reason "undecodable delivery row"), so damage never stalls the tenant.
func (db *DB) ClaimDue(ord uint32, now int64, max int, maxBytes int64, dst []Claimed) ([]Claimed, error) {
	start := len(dst)
	dst, err := db.claimDue(ord, now, max, maxBytes, dst)
	if err != nil || len(dst) == start {
		return dst, err
	}
	_ = db.read(func() error {
		db.attachHooks(dst[start:])
		return nil
	})
	return dst, nil
}

// claimDue is ClaimDue without the hooks.
func (db *DB) claimDue(ord uint32, now int64, max int, maxBytes int64, dst []Claimed) ([]Claimed, error) {
	db.cmu.Lock()
	defer db.cmu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return dst, ErrClosed
	}
	if max <= 0 || now < 0 {
		return dst, nil
	}
	rows := cursor{it: db.rdb.NewIteratorCF(db.ro, db.cfs[cfDeliveries])}
	defer rows.it.Close()
	db.ed.reset()
	wb := db.owb
	wb.Clear()
	index := db.cfs[cfIndex]

	// Keys of ord due at or before now: [head, 'd' ord now+1).
	db.wroUpper = binary.BigEndian.AppendUint64(AppendDuePrefix(db.wroUpper[:0], ord), uint64(now)+1)
	db.wro.SetIterateUpperBound(db.wroUpper)
	it := db.rdb.NewIteratorCF(db.wro, index)
	defer it.Close()
	if head := db.qs.tenants[ord]; head != nil && head.head != nil {
		it.Seek(head.head)
	} else {
		it.Seek(AppendDuePrefix(db.okey[:0], ord))
	}

	start := len(dst)
	var claimedBytes int64
	visited := false
	e := db.editLocked(ord)
	for ; it.Valid() && len(dst)-start < max; it.Next() {
		k := it.Key().Data()
		dk, err := ParseDueKey(k)
		if err == nil && dk.Ord != ord {
			err = fmt.Errorf("due key %x outside tenant %d's range: %w", k, ord, ErrBadKey)
		}
		if err != nil {
			return dst[:start], fmt.Errorf("cannot claim for tenant %d: %w", ord, err)
		}
		size, err := ParseIndexValue(it.Value().Data())
		if err != nil {
			return dst[:start], fmt.Errorf("due key %+v: %w", dk, err)
		}
		if maxBytes > 0 && len(dst) > start && claimedBytes+int64(size) > maxBytes {
			break
		}
		db.lastKey = append(db.lastKey[:0], k...)
		visited = true
		wb.DeleteCF(index, k)
		row, found, err := rows.row(DeliveryKey{Seq: dk.Seq, Sink: dk.Sink})
		switch {
		case !found:
			e.dropWaiting(size)
			db.log.Warn().Uint64("seq", dk.Seq).Uint16("sink", dk.Sink).Msg("due key without a delivery row: deleted")
			continue
		case err != nil:
			e.dropWaiting(size)
			e.counts.dead++
			db.okey = DeadKey{Ord: ord, At: now, Seq: dk.Seq, Sink: dk.Sink}.Append(db.okey[:0])
			wb.PutCF(index, db.okey, it.Value().Data())
			db.log.Error().Err(err).Uint64("seq", dk.Seq).Uint16("sink", dk.Sink).Msg("undecodable delivery row: dead-lettered")
			continue
		}
		if row.State == StateScheduled {
			e.counts.scheduled--
		} else {
			e.counts.pending--
		}
		e.counts.pendingBytes -= int64(size)
		e.counts.inflight++
		claimedBytes += int64(size)
		dst = append(dst, Claimed{Seq: dk.Seq, Sink: dk.Sink, Ord: ord, Size: size, DueAt: dk.At, Row: row,
			sole: rows.soleOf(dk.Seq)})
	}
	if err := it.Err(); err != nil {
		return dst[:start], fmt.Errorf("cannot scan the due rows of tenant %d: %w", ord, err)
	}
	if err := rows.it.Err(); err != nil {
		return dst[:start], fmt.Errorf("cannot read the delivery rows of tenant %d: %w", ord, err)
	}
	if !visited {
		return dst, nil
	}
	// The inflight keys go in after every due key's deletion rather than between them: each run of keys enters
	// the index CF's skip list next to the previous one instead of searching it from the top.
	for i := start; i < len(dst); i++ {
		c := &dst[i]
		db.okey = InflightKey{Ord: ord, Seq: c.Seq, Sink: c.Sink}.Append(db.okey[:0])
		db.oval = AppendInflightValue(db.oval[:0], c.Size, c.DueAt)
		wb.PutCF(index, db.okey, db.oval)
	}
	db.putCountersLocked(wb)
	if err := db.rdb.Write(db.woAsync, wb); err != nil {
		return dst[:start], &WriteError{Class: classify(err), Err: err}
	}
	db.applyEditsLocked(nil)
	if db.inflight == nil {
		db.inflight = make(map[InflightKey]struct{})
	}
	for i := start; i < len(dst); i++ {
		db.inflight[InflightKey{Ord: ord, Seq: dst[i].Seq, Sink: dst[i].Sink}] = struct{}{}
	}
	db.stateMu.Lock()
	ts := db.qs.tenant(ord)
	// Seek just past the last key this claim deleted: a zero byte after it sorts before any longer-lived key.
	ts.head = append(append(ts.head[:0], db.lastKey...), 0)
	db.stateMu.Unlock()
	return dst, nil
}

// Complete records that the sink confirmed c: the delivery row and its inflight key are deleted, and the hook
// too when it has no other delivery row (pending, claimed or dead) and no archive obligation. Group-committed
// with the outcomes queued beside it in one non-synced batch (outcomes.go); ErrNotClaimed if c is not claimed.
func (db *DB) Complete(c *Claimed) error {
	return db.settleOutcome(db.oq.get(outcomeComplete, c))
}

// Reschedule puts c back as due at `at` with attempts and lastErr recorded: a retry, or a parked row (attempts
// unchanged). It counts as scheduled from then on, and wakes Notify. ErrNotClaimed if c is not claimed.
func (db *DB) Reschedule(c *Claimed, attempts uint32, at int64, lastErr string) error {
	op := db.oq.get(outcomeReschedule, c)
	op.attempts, op.at, op.text = attempts, at, lastErr
	return db.settleOutcome(op)
}

// Bury dead-letters c: its row becomes dead with reason and DeadAt = at, its inflight key becomes a dead key,
// and the hook is kept (inventory F.4). ErrNotClaimed if c is not claimed.
func (db *DB) Bury(c *Claimed, attempts uint32, reason string, at int64) error {
	op := db.oq.get(outcomeBury, c)
	op.attempts, op.at, op.text = attempts, at, reason
	return db.settleOutcome(op)
}

// RecoverInflight moves every inflight key back to due at the time it was claimed at, so a row claimed before a
// crash or a dispatch restart is delivered again; it returns how many. Run it when dispatch starts, before it
// claims: an outcome still running for a recovered row then gets ErrNotClaimed.
func (db *DB) RecoverInflight() (int, error) {
	db.cmu.Lock()
	defer db.cmu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return 0, ErrClosed
	}
	db.ed.reset()
	wb := db.owb
	wb.Clear()
	index := db.cfs[cfIndex]
	db.wroUpper = append(db.wroUpper[:0], IndexInflight+1)
	db.wro.SetIterateUpperBound(db.wroUpper)
	it := db.rdb.NewIteratorCF(db.wro, index)
	defer it.Close()
	n := 0
	for it.Seek([]byte{IndexInflight}); it.Valid(); it.Next() {
		k := it.Key().Data()
		fk, err := ParseInflightKey(k)
		if err != nil {
			return 0, err
		}
		size, dueAt, err := ParseInflightValue(it.Value().Data())
		if err != nil {
			return 0, fmt.Errorf("inflight key %+v: %w", fk, err)
		}
		wb.DeleteCF(index, k)
		e := db.editLocked(fk.Ord)
		e.counts.inflight--
		row, found, err := db.readRow(DeliveryKey{Seq: fk.Seq, Sink: fk.Sink})
		if !found {
			continue
		}
		// An undecodable row goes back as pending; the claim that meets it dead-letters it.
		if err == nil && row.State == StateScheduled {
			e.counts.scheduled++
		} else {
			e.counts.pending++
		}
		e.counts.pendingBytes += int64(size)
		db.okey = DueKey{Ord: fk.Ord, At: dueAt, Seq: fk.Seq, Sink: fk.Sink}.Append(db.okey[:0])
		db.oval = AppendIndexValue(db.oval[:0], size)
		wb.PutCF(index, db.okey, db.oval)
		e.dueWritten(db.okey)
		n++
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("cannot scan the inflight keys: %w", err)
	}
	if len(db.ed.list) == 0 {
		clear(db.inflight)
		return 0, nil
	}
	db.putCountersLocked(wb)
	if err := db.rdb.Write(db.woAsync, wb); err != nil {
		return 0, &WriteError{Class: classify(err), Err: err}
	}
	db.applyEditsLocked(nil)
	clear(db.inflight) // an outcome still running for a recovered row finds it not claimed
	if n > 0 {
		db.wake()
	}
	return n, nil
}

// NextDue returns the due time of tenant ord's first due row (one seek from the tenant's head); ok=false when
// it has none.
func (db *DB) NextDue(ord uint32) (at int64, ok bool, err error) {
	err = db.read(func() error {
		var head []byte
		db.stateMu.Lock()
		if ts := db.qs.tenants[ord]; ts != nil && ts.head != nil {
			head = bytes.Clone(ts.head)
		}
		db.stateMu.Unlock()
		at, ok, err = db.nextDueOf(ord, head)
		return err
	})
	return at, ok, err
}

// OldestDue returns the smallest due time over the tenants with rows waiting (one seek each); ok=false when
// none has any.
func (db *DB) OldestDue() (at int64, ok bool, err error) {
	err = db.read(func() error {
		type start struct {
			ord  uint32
			head []byte
		}
		db.stateMu.Lock()
		starts := make([]start, 0, len(db.qs.active))
		for _, ord := range db.qs.active {
			starts = append(starts, start{ord: ord, head: bytes.Clone(db.qs.tenants[ord].head)})
		}
		db.stateMu.Unlock()
		for _, s := range starts {
			t, found, err := db.nextDueOf(s.ord, s.head)
			if err != nil {
				return err
			}
			if found && (!ok || t < at) {
				at, ok = t, true
			}
		}
		return nil
	})
	return at, ok, err
}

// nextDueOf seeks tenant ord's first due key from head (nil: its prefix), bounded to the tenant's range so
// the seek never walks another tenant's tombstones. The caller holds closeMu.
func (db *DB) nextDueOf(ord uint32, head []byte) (int64, bool, error) {
	upper := AppendDuePrefix(nil, ord+1)
	if ord == ^uint32(0) {
		upper = []byte{IndexDue + 1}
	}
	it, done := db.boundedIter(cfIndex, AppendDuePrefix(nil, ord), upper)
	defer done()
	if head == nil {
		head = AppendDuePrefix(nil, ord)
	}
	it.Seek(head)
	if it.Valid() {
		dk, err := ParseDueKey(it.Key().Data())
		if err != nil {
			return 0, false, err
		}
		return dk.At, true, nil
	}
	if err := it.Err(); err != nil {
		return 0, false, fmt.Errorf("cannot seek the due rows of tenant %d: %w", ord, err)
	}
	return 0, false, nil
}

// DeadEntry is one dead-lettered delivery (a DLQ entry).
type DeadEntry struct {
	Seq        uint64
	Sink       uint16
	Tenant     string
	Source     string
	SinkType   string
	Reason     string
	DeadAt     int64
	ReceivedAt int64
	Size       uint32
	ID         [16]byte
}

// ListDead returns up to limit dead entries, newest first (by time of death), of source ("" = every source). It
// merges the dead ranges of the tenants holding dead rows, walking each backwards, so it reads about limit rows
// when no source is given. A row that cannot be decoded is listed with reason "undecodable delivery row".
func (db *DB) ListDead(source string, limit int) ([]DeadEntry, error) {
	return db.ListDeadPage(DeadFilter{Source: source}, limit)
}

// DeadFilter selects the dead entries ListDeadPage lists; every field given must match.
type DeadFilter struct {
	Source  string   // "" = every source
	Tenants []string // nil = every tenant
	Since   int64    // dead-lettered at or after, unix ms (0 = unbounded)
	Reason  string   // "" = every reason, else only rows dead-lettered for it
	// MaxVisits, when > 0, bounds the dead keys one call visits: a filter that matches little stops there, and
	// the page it returns (fewer than limit entries) says where to resume (DeadPage.Resume).
	MaxVisits int
	// Before, when set, lists only entries after it in newest-first order: the page cursor, the last entry of
	// the previous page ({DeadAt, Seq, Sink} order every dead row of the node; Ord is ignored).
	Before *DeadKey
}

// Cursor is the page cursor that lists the entries after e.
func (e DeadEntry) Cursor() DeadKey { return DeadKey{At: e.DeadAt, Seq: e.Seq, Sink: e.Sink} }

// ListDeadPage is ListDead with a filter: a page of up to limit entries, newest first, of the tenants, source and
// time f selects, after f.Before.
func (db *DB) ListDeadPage(f DeadFilter, limit int) ([]DeadEntry, error) {
	p, err := db.ScanDeadPage(f, limit)
	return p.Entries, err
}

// DeadPage is one page of ScanDeadPage.
type DeadPage struct {
	Entries []DeadEntry
	// Resume is set when the scan stopped at f.MaxVisits before filling the page: the cursor (f.Before) of the
	// next call, past every key visited.
	Resume *DeadKey
}

// ScanDeadPage is ListDeadPage that stops after f.MaxVisits dead keys (when set), so a filter matching few rows
// costs a bounded read per call.
func (db *DB) ScanDeadPage(f DeadFilter, limit int) (DeadPage, error) {
	source := f.Source
	var out []DeadEntry
	var resume *DeadKey
	visits := 0
	err := db.read(func() error {
		if limit <= 0 {
			return nil
		}
		type cursor struct {
			ord  uint32
			name string
			it   *grocksdb.Iterator
			done func()
			key  DeadKey
			size uint32
		}
		db.stateMu.Lock()
		var curs []*cursor
		for ord, ts := range db.qs.tenants {
			if ts.counts.dead > 0 && (f.Tenants == nil || slices.Contains(f.Tenants, ts.name)) {
				curs = append(curs, &cursor{ord: ord, name: ts.name})
			}
		}
		db.stateMu.Unlock()
		defer func() {
			for _, c := range curs {
				if c.done != nil {
					c.done()
				}
			}
		}()
		// load reads the key under c.it, or drops c from the merge when its range is exhausted.
		load := func(c *cursor) (bool, error) {
			if !c.it.Valid() {
				if err := c.it.Err(); err != nil {
					return false, fmt.Errorf("cannot scan the dead rows of tenant %d: %w", c.ord, err)
				}
				return false, nil
			}
			k, err := ParseDeadKey(c.it.Key().Data())
			if err != nil {
				return false, err
			}
			size, err := ParseIndexValue(c.it.Value().Data())
			if err != nil {
				return false, fmt.Errorf("dead key %+v: %w", k, err)
			}
			c.key, c.size = k, size
			return true, nil
		}
		live := curs[:0:0]
		for _, c := range curs {
			upper := AppendDeadPrefix(nil, c.ord+1)
			if c.ord == ^uint32(0) {
				upper = []byte{IndexDead + 1}
			}
			c.it, c.done = db.boundedIter(cfIndex, AppendDeadPrefix(nil, c.ord), upper)
			if f.Before != nil {
				// The last key before the cursor: seek to it (or the one before it) and step over the cursor's own.
				b := *f.Before
				b.Ord = c.ord
				at := b.Append(nil)
				c.it.SeekForPrev(at)
				if c.it.Valid() && bytes.Equal(c.it.Key().Data(), at) {
					c.it.Prev()
				}
			} else {
				c.it.SeekForPrev(upper)
			}
			if !c.it.Valid() || !bytes.HasPrefix(c.it.Key().Data(), AppendDeadPrefix(nil, c.ord)) {
				if err := c.it.Err(); err != nil {
					return fmt.Errorf("cannot scan the dead rows of tenant %d: %w", c.ord, err)
				}
				continue
			}
			ok, err := load(c)
			if err != nil {
				return err
			}
			if ok {
				live = append(live, c)
			}
		}
		newer := func(a, b DeadKey) int {
			return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Sink, b.Sink))
		}
		for len(out) < limit && len(live) > 0 {
			i := 0
			for j := 1; j < len(live); j++ {
				if newer(live[j].key, live[i].key) > 0 {
					i = j
				}
			}
			c := live[i]
			if f.Since > 0 && c.key.At < f.Since {
				break // the newest left is older than the window: so is everything after it
			}
			if f.MaxVisits > 0 && visits >= f.MaxVisits {
				k := DeadKey{At: c.key.At, Seq: c.key.Seq, Sink: c.key.Sink + 1} // resume at c's key, inclusive
				if c.key.Sink == ^uint16(0) {
					k = DeadKey{At: c.key.At, Seq: c.key.Seq + 1}
				}
				resume = &k
				break
			}
			visits++
			entry, keep, err := db.deadEntry(c.key, c.size, c.name, source, f.Reason)
			if err != nil {
				return err
			}
			if keep {
				out = append(out, entry)
			}
			c.it.Prev()
			ok := c.it.Valid() && bytes.HasPrefix(c.it.Key().Data(), AppendDeadPrefix(nil, c.ord))
			if ok {
				if ok, err = load(c); err != nil {
					return err
				}
			} else if err := c.it.Err(); err != nil {
				return fmt.Errorf("cannot scan the dead rows of tenant %d: %w", c.ord, err)
			}
			if !ok {
				live = slices.Delete(live, i, i+1)
			}
		}
		return nil
	})
	return DeadPage{Entries: out, Resume: resume}, err
}

// deadEntry reads the row and the hook id behind dead key k; keep is false when the row is of another source or
// dead for another reason than reason (when set).
func (db *DB) deadEntry(k DeadKey, size uint32, tenant, source, reason string) (DeadEntry, bool, error) {
	e := DeadEntry{Seq: k.Seq, Sink: k.Sink, Tenant: tenant, DeadAt: k.At, Size: size}
	row, found, err := db.readRow(DeliveryKey{Seq: k.Seq, Sink: k.Sink})
	switch {
	case !found:
		return e, false, nil // settled between the key and the row: not dead any more
	case err != nil:
		e.Reason = undecodableReason
		if source != "" || reason != "" && reason != undecodableReason {
			return e, false, nil
		}
	default:
		if source != "" && row.Source != source || reason != "" && row.DeadReason != reason {
			return e, false, nil
		}
		e.Source, e.SinkType, e.Reason, e.ReceivedAt = row.Source, row.SinkType, row.DeadReason, row.ReceivedAt
	}
	v, err := db.getCF(cfHooks, AppendHookKey(nil, k.Seq))
	if err != nil {
		return e, false, err
	}
	if len(v) >= 17 && knownHookVersion(v[0]) {
		e.ID = [16]byte(v[1:17])
	}
	return e, true, nil
}

// readRow reads and decodes one delivery row straight from RocksDB's buffer. found is false for a missing row;
// err is set (with found true) for one that cannot be decoded or read.
func (db *DB) readRow(k DeliveryKey) (row DeliveryRow, found bool, err error) {
	var kb [DeliveryKeyLen]byte
	s, err := db.rdb.GetCF(db.ro, db.cfs[cfDeliveries], k.Append(kb[:0]))
	if err != nil {
		return DeliveryRow{}, true, fmt.Errorf("cannot read delivery %d/%d: %w", k.Seq, k.Sink, err)
	}
	defer s.Free()
	if !s.Exists() {
		return DeliveryRow{}, false, nil
	}
	row, err = DecodeDeliveryRow(s.Data())
	if err != nil {
		return DeliveryRow{}, true, fmt.Errorf("delivery %d/%d: %w", k.Seq, k.Sink, err)
	}
	return row, true, nil
}

// cursor reads keys of one CF given in mostly ascending order by walking one iterator: the keys a claim page
// or an outcome group needs follow each other (its delivery rows, its hooks), so the next one is usually where
// the iterator stands or one Next away, which costs far less than a point read or a seek; a key out of step
// costs one seek. Between calls the iterator stands at the first key at or after from (or is invalid when
// there is none), so a key between from and the iterator's key is known not to exist without a read.
type cursor struct {
	it   *grocksdb.Iterator
	key  []byte // scratch for the caller's keys
	from []byte
	set  bool // from is set: the iterator has been positioned
	// prev is the key right before the iterator's in the CF when prevOK: the iterator stepped from it.
	prev   []byte
	prevOK bool
}

// ge positions the iterator at the first key at or after key; false when there is none.
func (c *cursor) ge(key []byte) bool {
	if c.set && bytes.Compare(key, c.from) >= 0 {
		for step := 0; c.it.Valid(); step++ {
			k := c.it.Key().Data()
			if bytes.Compare(k, key) >= 0 {
				c.from = append(c.from[:0], key...)
				return true
			}
			if step == 2 {
				break // too far behind: a seek costs less
			}
			c.prev, c.prevOK = append(c.prev[:0], k...), true
			c.it.Next()
		}
		if !c.it.Valid() && c.it.Err() == nil {
			// Nothing at or after from, so nothing at or after key either.
			c.from = append(c.from[:0], key...)
			return false
		}
	}
	c.it.Seek(key)
	c.from, c.set, c.prevOK = append(c.from[:0], key...), true, false
	return c.it.Valid()
}

// find positions the iterator at key; false when the CF has no such key.
func (c *cursor) find(key []byte) bool {
	return c.ge(key) && bytes.Equal(c.it.Key().Data(), key)
}

// moved tells the cursor the caller moved the iterator on (Next) past from.
func (c *cursor) moved() {
	c.prevOK = false
	if c.it.Valid() {
		c.from = append(c.from[:0], c.it.Key().Data()...)
	} else {
		c.set = false // an exhausted or failed iterator seeks again
	}
}

// soleOf tells, with the iterator at a delivery row of hook seq (just found), whether it is the hook's only key
// in the CF: the key before it (known only when the cursor stepped to the row) and the key after it belong to
// other hooks. It steps the iterator past the row. False means not known.
func (c *cursor) soleOf(seq uint64) bool {
	if !c.it.Valid() {
		return false
	}
	lower := c.prevOK && len(c.prev) >= HookKeyLen && binary.BigEndian.Uint64(c.prev) < seq
	c.prev = append(c.prev[:0], c.it.Key().Data()...)
	c.it.Next()
	c.moved()
	c.prevOK = c.it.Valid() // stepped from the row
	if !lower {
		return false
	}
	if !c.it.Valid() {
		return c.it.Err() == nil // the row is the CF's last key
	}
	k := c.it.Key().Data()
	return len(k) >= HookKeyLen && binary.BigEndian.Uint64(k) > seq
}

// row reads and decodes delivery row k, as readRow does.
func (c *cursor) row(k DeliveryKey) (DeliveryRow, bool, error) {
	c.key = k.Append(c.key[:0])
	if !c.find(c.key) {
		if err := c.it.Err(); err != nil {
			return DeliveryRow{}, true, fmt.Errorf("cannot read delivery %d/%d: %w", k.Seq, k.Sink, err)
		}
		return DeliveryRow{}, false, nil
	}
	row, err := DecodeDeliveryRow(c.it.Value().Data())
	if err != nil {
		return DeliveryRow{}, true, fmt.Errorf("delivery %d/%d: %w", k.Seq, k.Sink, err)
	}
	return row, true, nil
}

// attachHooks reads the hook of every claimed row of cs into its Hook (the caller holds closeMu). A hook that
// cannot be read or decoded is left nil: the attempt reads it again and dead-letters the row with the reason.
func (db *DB) attachHooks(cs []Claimed) {
	hooks := cursor{it: db.rdb.NewIteratorCF(db.ro, db.cfs[cfHooks])}
	defer hooks.it.Close()
	var last *Hook
	for i := range cs {
		c := &cs[i]
		if last != nil && i > 0 && cs[i-1].Seq == c.Seq {
			c.Hook = last // another sink of the same hook
			continue
		}
		last = nil
		hooks.key = AppendHookKey(hooks.key[:0], c.Seq)
		if !hooks.find(hooks.key) {
			continue
		}
		h, err := DecodeHook(hooks.it.Value().Data()) // copies what it keeps
		if err != nil {
			continue
		}
		c.Hook, last = &h, &h
	}
}

// putRow adds delivery row r of {seq, sink} to wb (under cmu: it uses the writers' scratch).
func (db *DB) putRow(wb *grocksdb.WriteBatch, seq uint64, sink uint16, r *DeliveryRow) {
	db.okey = DeliveryKey{Seq: seq, Sink: sink}.Append(db.okey[:0])
	db.oval = AppendDeliveryRow(db.oval[:0], r)
	wb.PutCF(db.cfs[cfDeliveries], db.okey, db.oval)
}

// existsCF tells whether key is present in cf.
func (db *DB) existsCF(cf int, key []byte) (bool, error) {
	s, err := db.rdb.GetCF(db.ro, db.cfs[cf], key)
	if err != nil {
		return false, fmt.Errorf("cannot read %s key %x: %w", cfNames[cf], key, err)
	}
	defer s.Free()
	return s.Exists(), nil
}

// otherDeliveryLocked tells whether hook seq has a delivery row besides the one of sink (under cmu), not
// counting the rows the outcome group being built deletes; the delivered records it passes go to q.found
// (all of the hook's when it answers false). It walks the group's one iterator (created at the group's first
// call, closed by settleGroupLocked): creating an iterator costs more than a seek, and under cmu no write
// lands between the group's operations, so one snapshot serves them all. After a hook's rows the iterator
// stands at the next hook's, where the next outcome of a group in claim order looks.
func (db *DB) otherDeliveryLocked(seq uint64, sink uint16) (bool, error) {
	q := &db.oq
	if q.rows.it == nil {
		q.rows = cursor{it: db.rdb.NewIteratorCF(db.ro, db.cfs[cfDeliveries]), key: q.rows.key, from: q.rows.from}
	}
	c := &q.rows
	other := false
	q.found = q.found[:0]
	c.key = AppendHookKey(c.key[:0], seq)
	for ok := c.ge(c.key); ok; ok = c.it.Valid() {
		kb := c.it.Key().Data()
		if len(kb) < HookKeyLen || binary.BigEndian.Uint64(kb) != seq {
			break // past the hook's rows
		}
		if k, ok := deliveredKeyOf(kb); ok {
			q.found = append(q.found, k) // a sink delivered before: no row, its record
			c.it.Next()
			c.moved()
			continue
		}
		k, err := ParseDeliveryKey(kb)
		if err == nil {
			if _, gone := q.deleted[k]; gone || k.Sink == sink {
				c.it.Next()
				c.moved()
				continue
			}
		}
		other = true // an unparsable key under this seq is kept, and so is its hook
		break
	}
	if err := c.it.Err(); err != nil {
		return false, fmt.Errorf("cannot scan the delivery rows of hook %d: %w", seq, err)
	}
	return other, nil
}

// boundedIter returns an iterator over cf confined to [lower, upper) (so it never walks tombstones outside the
// range it was asked for), and the function that frees it. Each call has its own read options, so concurrent
// readers can use it.
func (db *DB) boundedIter(cf int, lower, upper []byte) (*grocksdb.Iterator, func()) {
	return db.rangeIter(cf, lower, upper, true)
}

// rangeIter is an iterator over cf confined to [lower, upper) whose reads fill the block cache or not.
func (db *DB) rangeIter(cf int, lower, upper []byte, fillCache bool) (*grocksdb.Iterator, func()) {
	ro := grocksdb.NewDefaultReadOptions()
	ro.SetVerifyChecksums(true)
	ro.SetFillCache(fillCache)
	// RocksDB reads the bounds in place; ro keeps both slices referenced until it is destroyed.
	ro.SetIterateLowerBound(lower)
	ro.SetIterateUpperBound(upper)
	it := db.rdb.NewIteratorCF(ro, db.cfs[cf])
	return it, func() {
		it.Close()
		ro.Destroy()
	}
}
