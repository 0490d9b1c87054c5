package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// A hook's seq follows its receipt: seqs are handed out in commit order, and a hook is committed right after
// its body is read. FindHook starts lookupBefore before the id's time (the batching of the edge and the group
// commit) and walks forward while the hooks it meets were received at most lookupAfter after it (a slow body).
const (
	lookupBefore = int64(2_000)
	lookupAfter  = int64(60_000)
)

// HookRecord is one stored hook found by id with the delivery rows it still has and the records of the sinks it
// was delivered to (a delivered row is deleted and its record written in its place; a sink with neither was
// delivered before the records existed, or the hook was stored without it).
type HookRecord struct {
	Seq       uint64
	Hook      Hook
	Rows      []DeliveryRow
	Delivered []Delivered
}

// FindHook finds the stored hook with id (ErrNotFound when the hooks CF holds none). The id is a UUIDv7 whose
// first 48 bits are the receipt time, and seqs follow receipt, so it binary-searches the hooks CF by received_at
// for the first hook received lookupBefore before the id's time and walks forward until it meets the id or a
// hook received lookupAfter after it: a few dozen point reads and a scan of the hooks received in about two
// seconds, whatever the store holds. A hook committed long after its receipt (a quarantine release, an archive
// replay) sits outside that window, as does an id never stored: then it scans the ids of the whole CF.
func (db *DB) FindHook(id [16]byte) (HookRecord, error) {
	var rec HookRecord
	err := db.read(func() error {
		at := int64(binary.BigEndian.Uint64(append([]byte{0, 0}, id[:6]...)))
		it, done := db.boundedIter(cfHooks, nil, nil)
		defer done()
		// receivedAt reads the receipt time of the hook under it, or reports it exhausted.
		receivedAt := func() (uint64, int64, bool) {
			if !it.Valid() {
				return 0, 0, false
			}
			k, v := it.Key().Data(), it.Value().Data()
			if len(k) != HookKeyLen || len(v) < 25 || !knownHookVersion(v[0]) {
				return 0, 0, false
			}
			return binary.BigEndian.Uint64(k), int64(binary.BigEndian.Uint64(v[17:25])), true
		}
		lo, hi := uint64(0), db.NextSeq()
		for lo < hi {
			mid := lo + (hi-lo)/2
			it.Seek(AppendHookKey(nil, mid))
			seq, r, ok := receivedAt()
			switch {
			case !ok:
				hi = mid
			case r < at-lookupBefore:
				lo = seq + 1
			default:
				hi = mid
			}
		}
		match := func(v []byte) bool { return len(v) >= 17 && bytes.Equal(v[1:17], id[:]) }
		found := false
		for it.Seek(AppendHookKey(nil, lo)); it.Valid(); it.Next() {
			seq, r, ok := receivedAt()
			if !ok || r > at+lookupAfter {
				break
			}
			if match(it.Value().Data()) {
				rec.Seq, found = seq, true
				break
			}
		}
		if !found {
			for it.SeekToFirst(); it.Valid(); it.Next() {
				if match(it.Value().Data()) {
					rec.Seq, found = binary.BigEndian.Uint64(it.Key().Data()), true
					break
				}
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("cannot scan the hooks: %w", err)
		}
		if !found {
			return fmt.Errorf("hook %x: %w", id, ErrNotFound)
		}
		h, err := DecodeHook(it.Value().Data())
		if err != nil {
			return fmt.Errorf("hook %d: %w", rec.Seq, err)
		}
		rec.Hook = h
		rit, rdone := db.boundedIter(cfDeliveries, AppendHookKey(nil, rec.Seq), AppendHookKey(nil, rec.Seq+1))
		defer rdone()
		for rit.SeekToFirst(); rit.Valid(); rit.Next() {
			if k, ok := deliveredKeyOf(rit.Key().Data()); ok {
				d, err := DecodeDelivered(k.Sink, rit.Value().Data())
				if err != nil {
					return fmt.Errorf("delivered record %d/%d: %w", k.Seq, k.Sink, err)
				}
				rec.Delivered = append(rec.Delivered, d)
				continue
			}
			row, err := DecodeDeliveryRow(rit.Value().Data())
			if err != nil {
				return fmt.Errorf("delivery row of hook %d: %w", rec.Seq, err)
			}
			rec.Rows = append(rec.Rows, row)
		}
		if err := rit.Err(); err != nil {
			return fmt.Errorf("cannot read the delivery rows of hook %d: %w", rec.Seq, err)
		}
		return nil
	})
	return rec, err
}
