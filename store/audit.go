package store

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/linxGnu/grocksdb"
)

// The audit trail (inventory G.6, E.2): one row per change, in commit order.
//
//	audit CF     'a', seq:64, at:64 → row (JSON: actor, client, request id, keyed hashes, revision, status)
//	             'e', seq:64 → the redacted entity of a row flagged for lifecycle publication
//	default CF   m:audit_seq → next audit seq:64, m:audit_key → the node's hash key (32 random bytes),
//	             v:<subject> → the subject's revision:64 (kept after a delete), m:lifecycle_cursor → seq:64
//
// A local change (its keys live in this store) commits its keys, its row, the subject's revision and the next
// audit seq in one synced batch: both survive a kill -9, or neither. An external change (its subject lives
// elsewhere, a shared Redis) is a synced pending row (BeginAudit), the change, then the row rewritten with
// its outcome (FinishAudit); a row left pending by a crash is settled at the next boot by hashing the subject.
//
// A row never holds a subject's state, only its HMAC-SHA256 under the node's key, so equal states can be
// recognised (settling, "did it change") without a secret ever reaching the trail.

// Audit row statuses.
const (
	AuditOK          = "ok"          // the change is made
	AuditPending     = "pending"     // an external change was started and not yet finished
	AuditFailed      = "failed"      // an external change was not made
	AuditInterrupted = "interrupted" // a crash left an external change unknown, or someone changed the subject meanwhile
)

const (
	auditRowPrefix      byte = 'a'
	auditEntityPrefix   byte = 'e'
	auditRowKeyLen           = 1 + 8 + 8
	metaAuditSeq             = "m:audit_seq"
	metaAuditKey             = "m:audit_key"
	metaLifecycleCursor      = "m:lifecycle_cursor"
	revisionPrefix           = "v:"
)

// ErrNoChange refuses an audited change whose subject's state before and after are equal: nothing is written
// and no row is made (a request that changes nothing leaves no row).
var ErrNoChange = errors.New("store: the change changes nothing")

// AuditEntry describes one change to audit. Before and After are the subject's canonical state (nil: absent);
// the store keeps only their keyed hashes.
type AuditEntry struct {
	Actor     string // the principal's name, or "system"
	Client    string // the client address
	RequestID string
	Action    string // what was done, e.g. "source.put", "log_level.set"
	Subject   string // what it was done to, e.g. "source:acme/github"; its revision counts per subject
	Tenant    string // "" for a change that belongs to no tenant (log level, global rules)
	Before    []byte
	After     []byte
	// Lifecycle flags the row for publication (lifecycle.sinks); Entity is the subject's redacted entity,
	// stored beside the row and deleted with it.
	Lifecycle bool
	Entity    []byte
}

// AuditOp is one default CF write of an audited local change.
type AuditOp struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// AuditRow is one row of the trail.
type AuditRow struct {
	Seq        uint64 `json:"seq"`
	At         int64  `json:"at"` // unix ms; never goes backwards
	Actor      string `json:"actor"`
	Client     string `json:"client,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
	Action     string `json:"action"`
	Subject    string `json:"subject"`
	Tenant     string `json:"tenant,omitempty"`
	BeforeHash string `json:"before_hash,omitempty"` // "" when the subject did not exist
	AfterHash  string `json:"after_hash,omitempty"`  // "" when it no longer exists
	Revision   uint64 `json:"revision"`
	Status     string `json:"status"`
	Lifecycle  bool   `json:"lifecycle,omitempty"`
}

// auditState is the audit writers' image, guarded by amu.
type auditState struct {
	loaded  bool
	nextSeq uint64
	key     []byte
	last    int64 // the last row's time
	wb      *grocksdb.WriteBatch
}

func appendAuditRowKey(dst []byte, seq uint64, at int64) []byte {
	dst = append(dst, auditRowPrefix)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	return binary.BigEndian.AppendUint64(dst, uint64(at))
}

func appendAuditEntityKey(dst []byte, seq uint64) []byte {
	dst = append(dst, auditEntityPrefix)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// loadAuditLocked reads the audit seq and key once, creating the key (synced) on first use. Held: amu, closeMu.
func (db *DB) loadAuditLocked() error {
	if db.aud.loaded {
		return nil
	}
	v, err := db.getCF(cfDefault, []byte(metaAuditSeq))
	if err != nil {
		return err
	}
	next := uint64(1)
	if v != nil {
		if len(v) != 8 {
			return fmt.Errorf("%s of %d bytes: %w", metaAuditSeq, len(v), ErrCorruptValue)
		}
		next = binary.BigEndian.Uint64(v)
	}
	key, err := db.getCF(cfDefault, []byte(metaAuditKey))
	if err != nil {
		return err
	}
	if key == nil {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return fmt.Errorf("cannot draw the audit key: %w", err)
		}
		if err := db.rdb.PutCF(db.wo, db.cfs[cfDefault], []byte(metaAuditKey), key); err != nil {
			return &WriteError{Class: classify(err), Err: err}
		}
	}
	db.aud = auditState{loaded: true, nextSeq: next, key: key, wb: grocksdb.NewWriteBatch()}
	return nil
}

// AuditHash is the keyed hash (HMAC-SHA256 under the node's audit key, hex) of a subject's state as the
// trail records it; "" for an absent subject (nil state).
func (db *DB) AuditHash(state []byte) (string, error) {
	db.amu.Lock()
	defer db.amu.Unlock()
	var h string
	err := db.read(func() error {
		if err := db.loadAuditLocked(); err != nil {
			return err
		}
		h = db.hashLocked(state)
		return nil
	})
	return h, err
}

func (db *DB) hashLocked(state []byte) string {
	if state == nil {
		return ""
	}
	m := hmac.New(sha256.New, db.aud.key)
	m.Write(state)
	return hex.EncodeToString(m.Sum(nil))
}

// AuditReader reads default CF keys inside an audited write, under its lock.
type AuditReader func(key []byte) ([]byte, error)

// Audited runs fn under the audit lock with a reader of the default CF, then commits the ops it returns, its
// row (status ok), the subject's next revision and the next audit seq in one synced batch. fn's error is
// returned as is and nothing is written; so is ErrNoChange when the entry's Before and After are equal. A
// failed write is a *WriteError and nothing of the change is made.
func (db *DB) Audited(fn func(get AuditReader) (AuditEntry, []AuditOp, error)) (AuditRow, error) {
	return db.audited(AuditOK, fn)
}

// CommitAudited commits ops and the row of e in one synced batch (Audited without a read).
func (db *DB) CommitAudited(e AuditEntry, ops ...AuditOp) (AuditRow, error) {
	return db.Audited(func(AuditReader) (AuditEntry, []AuditOp, error) { return e, ops, nil })
}

// BeginAudit writes the synced pending row of an external change (the change is made elsewhere after it
// returns). The caller makes the change, then calls FinishAudit with the outcome.
func (db *DB) BeginAudit(e AuditEntry) (AuditRow, error) {
	return db.audited(AuditPending, func(AuditReader) (AuditEntry, []AuditOp, error) { return e, nil, nil })
}

func (db *DB) audited(status string, fn func(get AuditReader) (AuditEntry, []AuditOp, error)) (AuditRow, error) {
	return db.auditedWith(status, nil, fn, nil)
}

// auditedWith is audited for a change that also moves delivery rows (AuditedSourceDelete): with before set it
// holds cmu too (after amu, before closeMu, the writers' order), runs before ahead of fn (its error refuses
// the change), and extra adds its writes and counters to the batch; the counters are applied once it is
// written.
func (db *DB) auditedWith(status string, before func() error, fn func(get AuditReader) (AuditEntry, []AuditOp, error),
	extra func(put func(cf int, k, v []byte), del func(cf int, k []byte))) (AuditRow, error) {
	db.amu.Lock()
	defer db.amu.Unlock()
	if before != nil {
		db.cmu.Lock()
		defer db.cmu.Unlock()
	}
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return AuditRow{}, ErrClosed
	}
	if err := db.loadAuditLocked(); err != nil {
		return AuditRow{}, err
	}
	if before != nil {
		if err := before(); err != nil {
			return AuditRow{}, err
		}
	}
	e, ops, err := fn(func(key []byte) ([]byte, error) { return db.getCF(cfDefault, key) })
	if err != nil {
		return AuditRow{}, err
	}
	if bytes.Equal(e.Before, e.After) && (e.Before == nil) == (e.After == nil) {
		return AuditRow{}, ErrNoChange
	}
	revKey := append([]byte(revisionPrefix), e.Subject...)
	v, err := db.getCF(cfDefault, revKey)
	if err != nil {
		return AuditRow{}, err
	}
	var rev uint64
	if len(v) == 8 {
		rev = binary.BigEndian.Uint64(v)
	}
	rev++
	row := AuditRow{
		Seq: db.aud.nextSeq, At: max(time.Now().UnixMilli(), db.aud.last), Actor: e.Actor, Client: e.Client,
		RequestID: e.RequestID, Action: e.Action, Subject: e.Subject, Tenant: e.Tenant,
		BeforeHash: db.hashLocked(e.Before), AfterHash: db.hashLocked(e.After), Revision: rev, Status: status,
		Lifecycle: e.Lifecycle,
	}
	enc, err := json.Marshal(row)
	if err != nil {
		return AuditRow{}, fmt.Errorf("cannot encode audit row: %w", err)
	}
	wb := db.aud.wb
	wb.Clear()
	for _, op := range ops {
		if op.Delete {
			wb.DeleteCF(db.cfs[cfDefault], op.Key)
		} else {
			wb.PutCF(db.cfs[cfDefault], op.Key, op.Value)
		}
	}
	wb.PutCF(db.cfs[cfDefault], revKey, binary.BigEndian.AppendUint64(nil, rev))
	wb.PutCF(db.cfs[cfDefault], []byte(metaAuditSeq), binary.BigEndian.AppendUint64(nil, row.Seq+1))
	wb.PutCF(db.cfs[cfAudit], appendAuditRowKey(nil, row.Seq, row.At), enc)
	if e.Lifecycle {
		wb.PutCF(db.cfs[cfAudit], appendAuditEntityKey(nil, row.Seq), e.Entity)
	}
	if extra != nil {
		extra(func(cf int, k, v []byte) { wb.PutCF(db.cfs[cf], k, v) }, func(cf int, k []byte) { wb.DeleteCF(db.cfs[cf], k) })
	}
	if err := db.writeAuditLocked(wb); err != nil {
		if before != nil {
			db.ed.reset()
		}
		return AuditRow{}, err
	}
	if before != nil {
		db.applyEditsLocked(nil)
	}
	db.aud.nextSeq, db.aud.last = row.Seq+1, row.At
	select {
	case db.anotify <- struct{}{}:
	default:
	}
	return row, nil
}

// writeAuditLocked writes wb synced, through the BeforeAudit fault.
func (db *DB) writeAuditLocked(wb *grocksdb.WriteBatch) error {
	if f := db.faults; f != nil && f.BeforeAudit != nil {
		if err := f.BeforeAudit(); err != nil {
			return &WriteError{Class: classify(err), Err: err}
		}
	}
	if err := db.rdb.Write(db.wo, wb); err != nil {
		return &WriteError{Class: classify(err), Err: err}
	}
	return nil
}

// FinishAudit rewrites a pending row with its outcome (AuditOK, AuditFailed or AuditInterrupted), synced.
func (db *DB) FinishAudit(row AuditRow, status string) (AuditRow, error) {
	db.amu.Lock()
	defer db.amu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return row, ErrClosed
	}
	if err := db.loadAuditLocked(); err != nil {
		return row, err
	}
	row.Status = status
	enc, err := json.Marshal(row)
	if err != nil {
		return row, fmt.Errorf("cannot encode audit row: %w", err)
	}
	wb := db.aud.wb
	wb.Clear()
	wb.PutCF(db.cfs[cfAudit], appendAuditRowKey(nil, row.Seq, row.At), enc)
	return row, db.writeAuditLocked(wb)
}

// AuditFilter selects rows of ListAudit.
type AuditFilter struct {
	After   uint64   // rows with a greater seq only (a cursor: the last seq read)
	Tenants []string // nil: every row; else only rows of these tenants (a tenant-scoped reader; empty: none)
	Tenant  string   // "" or one tenant
	Subject string   // "" or one subject
	Pending bool     // only pending rows
	Flagged bool     // only rows flagged for lifecycle publication
}

func (f *AuditFilter) match(r *AuditRow) bool {
	switch {
	case f.Tenants != nil && !containsStr(f.Tenants, r.Tenant):
		return false
	case f.Tenant != "" && r.Tenant != f.Tenant:
		return false
	case f.Subject != "" && r.Subject != f.Subject:
		return false
	case f.Pending && r.Status != AuditPending:
		return false
	case f.Flagged && !r.Lifecycle:
		return false
	}
	return true
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// ListAudit returns up to limit rows matching f, in commit order (seq ascending).
func (db *DB) ListAudit(f AuditFilter, limit int) ([]AuditRow, error) {
	var out []AuditRow
	if limit <= 0 {
		return out, nil
	}
	err := db.read(func() error {
		start := appendAuditRowKey(nil, f.After+1, 0)
		if f.After == ^uint64(0) {
			return nil
		}
		return db.forEachAuditRow(start, func(_ []byte, r AuditRow) (bool, error) {
			if f.match(&r) {
				out = append(out, r)
			}
			return len(out) < limit, nil
		})
	})
	return out, err
}

// forEachAuditRow calls fn for every row from start on, in seq order, until fn returns false or an error. k
// points into C memory valid only during the call. Held: closeMu (shared).
func (db *DB) forEachAuditRow(start []byte, fn func(k []byte, r AuditRow) (bool, error)) error {
	it := db.rdb.NewIteratorCF(db.ro, db.cfs[cfAudit])
	defer it.Close()
	for it.Seek(start); it.Valid(); it.Next() {
		k := it.Key().Data()
		if len(k) == 0 || k[0] != auditRowPrefix {
			break
		}
		r, err := decodeAuditRow(k, it.Value().Data())
		if err != nil {
			return err
		}
		if more, err := fn(k, r); err != nil || !more {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("cannot scan audit: %w", err)
	}
	return nil
}

func decodeAuditRow(k, v []byte) (AuditRow, error) {
	var r AuditRow
	if len(k) != auditRowKeyLen {
		return r, fmt.Errorf("audit key %x: %w", k, ErrBadKey)
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("audit row %x: %w", k, ErrCorruptValue)
	}
	r.Seq = binary.BigEndian.Uint64(k[1:])
	r.At = int64(binary.BigEndian.Uint64(k[9:]))
	return r, nil
}

// AuditNotify is signalled (capacity one, never blocking the writer) after every audited write.
func (db *DB) AuditNotify() <-chan struct{} { return db.anotify }

// AuditEntity returns the redacted entity stored beside a flagged row (nil if none).
func (db *DB) AuditEntity(seq uint64) ([]byte, error) {
	var v []byte
	err := db.read(func() error {
		var err error
		v, err = db.getCF(cfAudit, appendAuditEntityKey(nil, seq))
		return err
	})
	return v, err
}

// LifecycleCursor is the seq of the last flagged row the lifecycle publisher delivered (0: none).
func (db *DB) LifecycleCursor() (uint64, error) {
	var c uint64
	err := db.read(func() error {
		v, err := db.getCF(cfDefault, []byte(metaLifecycleCursor))
		if err != nil || v == nil {
			return err
		}
		if len(v) != 8 {
			return fmt.Errorf("%s of %d bytes: %w", metaLifecycleCursor, len(v), ErrCorruptValue)
		}
		c = binary.BigEndian.Uint64(v)
		return nil
	})
	return c, err
}

// SetLifecycleCursor records (synced) that every flagged row up to seq was published.
func (db *DB) SetLifecycleCursor(seq uint64) error {
	return db.read(func() error {
		if err := db.rdb.PutCF(db.wo, db.cfs[cfDefault], []byte(metaLifecycleCursor),
			binary.BigEndian.AppendUint64(nil, seq)); err != nil {
			return &WriteError{Class: classify(err), Err: err}
		}
		return nil
	})
}

// PruneAudit deletes the rows older than before (unix ms), oldest first, stopping at the first pending row.
// With holdCursor (lifecycle.sinks set) a row above the lifecycle cursor is kept, so a sink that is down for
// longer than the retention still gets its events, and so is a row a lifecycle replay job (running or
// paused) has not passed yet; blocked counts the expired rows so held back.
func (db *DB) PruneAudit(before int64, holdCursor bool) (deleted, blocked int, err error) {
	var keepFrom uint64
	if holdCursor {
		c, err := db.LifecycleCursor()
		if err != nil {
			return 0, 0, err
		}
		keepFrom = c + 1
		job, err := db.lifecycleHold()
		if err != nil {
			return 0, 0, err
		}
		if job > 0 {
			keepFrom = min(keepFrom, job)
		}
	}
	db.amu.Lock()
	defer db.amu.Unlock()
	err = db.read(func() error {
		wb := grocksdb.NewWriteBatch()
		defer wb.Destroy()
		err := db.forEachAuditRow([]byte{auditRowPrefix}, func(k []byte, r AuditRow) (bool, error) {
			if r.At >= before || r.Status == AuditPending {
				return false, nil
			}
			if keepFrom > 0 && r.Seq >= keepFrom {
				blocked++
				return true, nil
			}
			wb.DeleteCF(db.cfs[cfAudit], bytes.Clone(k))
			wb.DeleteCF(db.cfs[cfAudit], appendAuditEntityKey(nil, r.Seq))
			deleted++
			return true, nil
		})
		if err != nil {
			return err
		}
		if deleted == 0 {
			return nil
		}
		if err := db.rdb.Write(db.wo, wb); err != nil {
			deleted = 0
			return &WriteError{Class: classify(err), Err: err}
		}
		return nil
	})
	return deleted, blocked, err
}

// SubjectState reads a pending row's subject where it lives: its canonical state (nil: absent), and known
// false for a subject it cannot read back (the row is then interrupted: the change may or may not be made).
type SubjectState func(row AuditRow) (state []byte, known bool, err error)

// SettleAudit finishes every pending row (a crash came between an external change's row and its outcome) by
// reading its subject: a state hashing to the row's after hash is "ok" (the change was made), to its before
// hash "failed" (it was not), to neither "interrupted" (someone changed it meanwhile); a subject current cannot
// read is "interrupted". It returns the settled rows. A read error stops it with the rows settled so far.
// Only rows written before bootAt (unix ms) are settled: a later pending row is a change in progress.
func (db *DB) SettleAudit(current SubjectState, bootAt int64) ([]AuditRow, error) {
	var settled []AuditRow
	var after uint64
	for {
		rows, err := db.ListAudit(AuditFilter{After: after, Pending: true}, 256)
		if err != nil {
			return settled, err
		}
		if len(rows) == 0 {
			return settled, nil
		}
		for _, r := range rows {
			after = r.Seq
			if r.At >= bootAt {
				return settled, nil
			}
			state, known, err := current(r)
			if err != nil {
				return settled, fmt.Errorf("audit row %d: cannot read %s: %w", r.Seq, r.Subject, err)
			}
			status := AuditInterrupted
			if known {
				h, err := db.AuditHash(state)
				if err != nil {
					return settled, err
				}
				switch h {
				case r.AfterHash:
					status = AuditOK
				case r.BeforeHash:
					status = AuditFailed
				}
			}
			r, err = db.FinishAudit(r, status)
			if err != nil {
				return settled, err
			}
			settled = append(settled, r)
		}
	}
}

// ForEachAuditKey calls fn with every key and value of the audit column family, rows and entities alike, in
// key order (a test proves no secret ever reaches it). k and v are valid only during the call.
func (db *DB) ForEachAuditKey(fn func(k, v []byte) error) error {
	return db.read(func() error { return db.scan(cfAudit, nil, fn) })
}
