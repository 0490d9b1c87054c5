package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// A source's delivery rows (DELETE /v1/tenants/{t}/sources/{name}, inventory A.5). No key names a row's
// source: rows are keyed by hook seq and the index by tenant ordinal. There is no per-source counter either
// (the counters are per tenant), so a source's rows are found by walking its tenant's due and inflight ranges
// only ('d' ord and 'f' ord, bounded iterators) and reading each row's source: the backlog of other tenants
// is never read, and a tenant whose counters show nothing waiting or claimed costs no read at all.

// SourceRows counts a source's delivery rows still to be delivered.
type SourceRows struct {
	Pending  int64 // waiting for their due time: first attempts, retries, parked rows
	Inflight int64 // claimed by dispatch, an attempt under way
}

// Busy tells whether any row is left.
func (n SourceRows) Busy() bool { return n.Pending+n.Inflight > 0 }

// SourceHasDeliveriesError refuses to delete a source whose rows are still to be delivered (409
// source_has_deliveries).
type SourceHasDeliveriesError struct{ SourceRows }

func (e *SourceHasDeliveriesError) Error() string {
	return fmt.Sprintf("store: the source has %d pending and %d in-flight deliveries", e.Pending, e.Inflight)
}

// SourceGoneReason is the dead reason of a row whose source was deleted (inventory A.5 {:source_gone, id}).
func SourceGoneReason(source string) string { return "{source_gone, " + source + "}" }

// sourceRow is one waiting row of a source, found by a walk of its tenant's due range.
type sourceRow struct {
	due  []byte
	size uint32
	key  DueKey
	row  DeliveryRow
}

// sourceRowsLocked counts source's rows under tenant ord and, when collect, returns its waiting ones. Held:
// cmu (no claim or outcome moves a key meanwhile) and closeMu.
func (db *DB) sourceRowsLocked(ord uint32, source string, collect bool) (SourceRows, []sourceRow, error) {
	var n SourceRows
	var rows []sourceRow
	db.stateMu.Lock()
	var c tenantCounts
	if ts, ok := db.qs.tenants[ord]; ok {
		c = ts.counts
	}
	db.stateMu.Unlock()
	if c.pending+c.scheduled+c.inflight == 0 {
		return n, nil, nil
	}
	dels := cursor{it: db.rdb.NewIteratorCF(db.ro, db.cfs[cfDeliveries])}
	defer dels.it.Close()
	for _, kind := range []byte{IndexDue, IndexInflight} {
		lower := binary.BigEndian.AppendUint32([]byte{kind}, ord)
		upper := binary.BigEndian.AppendUint32([]byte{kind}, ord+1)
		if ord == ^uint32(0) {
			upper = []byte{kind + 1}
		}
		it, done := db.boundedIter(cfIndex, lower, upper)
		for it.Seek(lower); it.Valid(); it.Next() {
			k := it.Key().Data()
			var dk DeliveryKey
			var due DueKey
			if kind == IndexDue {
				d, err := ParseDueKey(k)
				if err != nil {
					done()
					return n, nil, err
				}
				due, dk = d, DeliveryKey{Seq: d.Seq, Sink: d.Sink}
			} else {
				f, err := ParseInflightKey(k)
				if err != nil {
					done()
					return n, nil, err
				}
				dk = DeliveryKey{Seq: f.Seq, Sink: f.Sink}
			}
			row, found, err := dels.row(dk)
			if !found || err != nil || row.Source != source {
				continue // an unreadable row is not known to be the source's: dispatch deals with it
			}
			if kind == IndexInflight {
				n.Inflight++
				continue
			}
			n.Pending++
			if collect {
				size, err := ParseIndexValue(it.Value().Data())
				if err != nil {
					done()
					return n, nil, fmt.Errorf("due key %+v: %w", due, err)
				}
				rows = append(rows, sourceRow{due: bytes.Clone(k), size: size, key: due, row: row})
			}
		}
		err := it.Err()
		done()
		if err != nil {
			return n, nil, fmt.Errorf("cannot scan the rows of tenant %d: %w", ord, err)
		}
	}
	return n, rows, nil
}

// CountSourceRows counts tenant's rows of source still to be delivered (see the walk above).
func (db *DB) CountSourceRows(tenant, source string) (SourceRows, error) {
	ord, ok := db.TenantOrdinal(tenant)
	if !ok {
		return SourceRows{}, nil
	}
	db.cmu.Lock()
	defer db.cmu.Unlock()
	var n SourceRows
	err := db.read(func() (err error) {
		n, _, err = db.sourceRowsLocked(ord, source, false)
		return err
	})
	return n, err
}

// buryWaitingLocked adds to wb the dead-lettering of rows (reason, DeadAt at): each row becomes dead, its due
// key a dead key, and the tenant's counters follow (putCountersLocked and applyEditsLocked by the caller).
// Held: cmu.
func (db *DB) buryWaitingLocked(wbPut func(cf int, k, v []byte), wbDel func(cf int, k []byte), ord uint32,
	rows []sourceRow, reason string, at int64) {
	e := db.editLocked(ord)
	for i := range rows {
		r := &rows[i]
		wbDel(cfIndex, r.due)
		row := r.row
		if row.State == StateScheduled {
			e.counts.scheduled--
		} else {
			e.counts.pending--
		}
		e.counts.pendingBytes = max(0, e.counts.pendingBytes-int64(r.size))
		e.counts.dead++
		row.State, row.DeadReason, row.DeadAt = StateDead, reason, at
		wbPut(cfDeliveries, DeliveryKey{Seq: r.key.Seq, Sink: r.key.Sink}.Append(nil), AppendDeliveryRow(nil, &row))
		wbPut(cfIndex, DeadKey{Ord: ord, At: at, Seq: r.key.Seq, Sink: r.key.Sink}.Append(nil),
			AppendIndexValue(nil, r.size))
	}
}

// BurySourceRows dead-letters tenant's waiting rows of source with reason, in one synced batch, and returns
// how many it buried (rows in flight are left to their outcome). The Redis source store calls it after the
// source is gone; the persistent one buries in its audited batch (AuditedSourceDelete).
func (db *DB) BurySourceRows(tenant, source, reason string, at int64) (int, error) {
	ord, ok := db.TenantOrdinal(tenant)
	if !ok {
		return 0, nil
	}
	db.cmu.Lock()
	defer db.cmu.Unlock()
	n := 0
	err := db.read(func() error {
		_, rows, err := db.sourceRowsLocked(ord, source, true)
		if err != nil || len(rows) == 0 {
			return err
		}
		db.ed.reset()
		wb := db.owb
		wb.Clear()
		db.buryWaitingLocked(func(cf int, k, v []byte) { wb.PutCF(db.cfs[cf], k, v) },
			func(cf int, k []byte) { wb.DeleteCF(db.cfs[cf], k) }, ord, rows, reason, at)
		db.putCountersLocked(wb)
		if err := db.rdb.Write(db.wo, wb); err != nil {
			db.ed.reset()
			return &WriteError{Class: classify(err), Err: err}
		}
		db.applyEditsLocked(nil)
		n = len(rows)
		return nil
	})
	return n, err
}

// SourceDelete is how AuditedSourceDelete treats the source's rows.
type SourceDelete struct {
	Tenant, Source string
	// DeadLetter buries the source's waiting rows (reason SourceGoneReason) in the change's batch; false
	// refuses the change with *SourceHasDeliveriesError while any row is waiting or in flight.
	DeadLetter bool
	At         int64 // unix ms, the buried rows' DeadAt
}

// AuditedSourceDelete is Audited for the delete of a source whose rows live in this store: under the audit lock
// and the counters' lock (no claim, outcome or commit moves a row meanwhile) it counts the source's rows; with
// rows and no d.DeadLetter it refuses (*SourceHasDeliveriesError, nothing written); else fn's ops, the audit
// row and the burial of the waiting rows commit in one synced batch. Rows in flight are left to their outcome:
// delivered, or dead-lettered by dispatch once it finds their source gone. It returns the rows counted.
func (db *DB) AuditedSourceDelete(d SourceDelete, fn func(get AuditReader) (AuditEntry, []AuditOp, error)) (AuditRow, SourceRows, error) {
	ord, hasOrd := db.TenantOrdinal(d.Tenant)
	var n SourceRows
	var rows []sourceRow
	row, err := db.auditedWith(AuditOK, func() error {
		if !hasOrd {
			return nil
		}
		var err error
		n, rows, err = db.sourceRowsLocked(ord, d.Source, d.DeadLetter)
		if err == nil && n.Busy() && !d.DeadLetter {
			err = &SourceHasDeliveriesError{n}
		}
		return err
	}, fn, func(wbPut func(cf int, k, v []byte), wbDel func(cf int, k []byte)) {
		if len(rows) == 0 {
			return
		}
		db.ed.reset()
		db.buryWaitingLocked(wbPut, wbDel, ord, rows, SourceGoneReason(d.Source), d.At)
		db.putCountersLocked(db.aud.wb)
	})
	return row, n, err
}
