package store

import (
	"slices"

	"github.com/linxGnu/grocksdb"
)

// Fresh claims: while dispatch has no backlog, a commit claims the rows it writes for dispatch itself. Their
// inflight keys go into the commit's batch where due keys would go, and once the batch is synced the rows reach
// dispatch with their hooks, decoded from the values the commit wrote. A row that would be claimed within the
// next scan anyway then costs neither the scan's wake-up nor a claim (a write, and reads of the row and the
// hook), and its first attempt starts without waiting for them. Dispatch says how many rows and body bytes the
// commits may claim (GrantFresh) and takes back what it cannot hold; a fresh row is claimed like any other, so
// RecoverInflight makes it due again after a crash, an erase finds it in db.inflight, and every outcome applies.
// Rows of ordered sinks are never claimed fresh: an ordered lane takes its rows in seq order from the due index.

// FreshFunc receives the rows one commit claimed for dispatch, in commit order, after the commit is synced. It
// is called under the store's commit lock: it must hand the rows on and return, never call the store. The
// slice is the receiver's; rows of one hook share its *Hook, which nothing may change.
type FreshFunc func(claims []Claimed)

// freshState is the receiver of fresh claims and its grant; guarded by freshMu, a leaf taken by the commit (under
// cmu) and by GrantFresh.
type freshState struct {
	fn   FreshFunc
	skip map[string]struct{} // tenants never claimed fresh
	gen  uint64              // bumped by SetFresh and GrantFresh: a commit gives back its unused take only to the grant it took
	rows int
	// bytes is what the grant leaves of body bytes; full the tenant ordinals it excludes.
	bytes int64
	full  []uint32
	// The receiver's rows out: handed to it (used), or taken by the commit in progress (reserved, given back in
	// part once it is written). GrantFresh shows both, so a grant never counts a row twice nor loses one.
	usedRows, reservedRows   int
	usedBytes, reservedBytes int64
	taken                    int64 // rows claimed fresh since open, for tests
	// claims is the group being built (under cmu): its rows, handed to fn once the batch is written.
	claims []Claimed
	hook   *Hook // the hook of the record being added, shared by its rows
}

// SetFresh makes fn the receiver of fresh claims with nothing granted and nothing out (nil: no fresh claims); no
// row of a tenant in skip is ever claimed fresh. It takes the commit lock, so once it returns no commit claims for
// the previous receiver: a receiver that installs itself and then calls RecoverInflight finds every row a
// predecessor was handed made due again.
func (db *DB) SetFresh(fn FreshFunc, skip map[string]struct{}) {
	db.cmu.Lock()
	defer db.cmu.Unlock()
	db.freshMu.Lock()
	defer db.freshMu.Unlock()
	f := &db.fresh
	f.fn, f.skip, f.gen, f.rows, f.bytes, f.full = fn, skip, f.gen+1, 0, 0, f.full[:0]
	f.usedRows, f.usedBytes, f.reservedRows, f.reservedBytes = 0, 0, 0, 0
}

// FreshGrant is what the commits may claim fresh: up to Rows rows and Bytes body bytes (a row whose body alone
// passes what is left is not claimed), of no tenant in Full.
type FreshGrant struct {
	Rows  int
	Bytes int64
	Full  []uint32
}

// GrantFresh replaces the grant with what decide returns. decide is told the rows and body bytes the commits
// have claimed for the receiver since SetFresh, the part of a commit in progress included, and runs under the
// grant's lock: it must only compute. Without a receiver it is not called.
func (db *DB) GrantFresh(decide func(outRows int, outBytes int64) FreshGrant) {
	db.freshMu.Lock()
	defer db.freshMu.Unlock()
	f := &db.fresh
	if f.fn == nil {
		return
	}
	g := decide(f.usedRows+f.reservedRows, f.usedBytes+f.reservedBytes)
	f.gen++
	f.rows, f.bytes = max(0, g.Rows), max(0, g.Bytes)
	f.full = append(f.full[:0], g.Full...)
}

// FreshTaken returns how many rows commits have claimed fresh since the store opened.
func (db *DB) FreshTaken() int64 {
	db.freshMu.Lock()
	defer db.freshMu.Unlock()
	return db.fresh.taken
}

// freshTake is the grant a commit took whole (the grant is left empty meanwhile) and what it used of it.
type freshTake struct {
	on    bool
	gen   uint64
	rows  int
	bytes int64
	full  []uint32
	skip  map[string]struct{}
	used  int
	usedB int64
	due   int // rows the commit wrote due, claimed or not: the scheduler is woken for them
}

// takeFreshLocked takes the whole grant for the commit being built, so the commit never holds freshMu across
// its loop; endFreshLocked settles it.
func (db *DB) takeFreshLocked() freshTake {
	db.freshMu.Lock()
	defer db.freshMu.Unlock()
	f := &db.fresh
	if f.fn == nil || f.rows <= 0 || f.bytes <= 0 {
		return freshTake{}
	}
	t := freshTake{on: true, gen: f.gen, rows: f.rows, bytes: f.bytes, full: append(db.freshFull[:0], f.full...), skip: f.skip}
	db.freshFull = t.full
	f.reservedRows, f.reservedBytes = f.rows, f.bytes
	f.rows, f.bytes = 0, 0
	return t
}

// wants reports whether a row of body size bytes of tenant (ordinal ord) may be claimed fresh, and takes it
// from t.
func (t *freshTake) wants(tenant string, ord uint32, size uint32, ordered bool) bool {
	if !t.on || ordered || t.rows <= t.used || int64(size) > t.bytes-t.usedB || slices.Contains(t.full, ord) {
		return false
	}
	if _, skip := t.skip[tenant]; skip {
		return false
	}
	t.used++
	t.usedB += int64(size)
	return true
}

// endFreshLocked settles a commit's take: with written set its rows count as the receiver's and go to it (under
// cmu, before the commit returns); the unused rest goes back to the grant unless GrantFresh replaced it
// meanwhile. Unwritten, the whole take goes back.
func (db *DB) endFreshLocked(t *freshTake, written bool) {
	if !t.on {
		return
	}
	db.freshMu.Lock()
	f := &db.fresh
	f.reservedRows, f.reservedBytes = 0, 0
	if !written {
		t.used, t.usedB = 0, 0
	}
	if f.gen == t.gen {
		f.rows, f.bytes = t.rows-t.used, t.bytes-t.usedB
	}
	f.usedRows += t.used
	f.usedBytes += t.usedB
	f.taken += int64(t.used)
	fn := f.fn
	db.freshMu.Unlock()
	claims := f.claims
	f.claims = nil
	if !written || len(claims) == 0 {
		clear(claims)
		f.claims = claims[:0]
		return
	}
	if db.inflight == nil {
		db.inflight = make(map[InflightKey]struct{})
	}
	for i := range claims {
		db.inflight[InflightKey{Ord: claims[i].Ord, Seq: claims[i].Seq, Sink: claims[i].Sink}] = struct{}{}
	}
	fn(claims)
}

// addFreshLocked adds row (of record r, tenant ord, sink row.SinkIndex) to wb as claimed at `at`, in place of
// its due key, and to the group's fresh claims, with the record's hook decoded once for all its rows.
func (db *DB) addFreshLocked(wb *grocksdb.WriteBatch, r *Record, ord uint32, at int64, row DeliveryRow, sole bool) {
	db.key = InflightKey{Ord: ord, Seq: r.Outcome.Seq, Sink: row.SinkIndex}.Append(db.key[:0])
	db.val = AppendInflightValue(db.val[:0], r.Size, at)
	wb.PutCF(db.cfs[cfIndex], db.key, db.val)
	if db.fresh.hook == nil {
		// A hook that does not decode goes without: the attempt reads it and dead-letters one really damaged.
		if h, err := DecodeHook(r.Value); err == nil {
			db.fresh.hook = &h
		}
	}
	db.fresh.claims = append(db.fresh.claims, Claimed{Seq: r.Outcome.Seq, Sink: row.SinkIndex, Ord: ord, Size: r.Size,
		DueAt: at, Row: row, Hook: db.fresh.hook, sole: sole})
}
