package store

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

// freshBox collects what a fresh receiver is handed.
type freshBox struct {
	mu     sync.Mutex
	claims []Claimed
}

func (b *freshBox) take(cs []Claimed) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.claims = append(b.claims, cs...)
}

func (b *freshBox) got() []Claimed {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Claimed(nil), b.claims...)
}

func grant(db *DB, rows int, bytes int64, full ...uint32) {
	db.GrantFresh(func(int, int64) FreshGrant { return FreshGrant{Rows: rows, Bytes: bytes, Full: full} })
}

func wantCounts(t *testing.T, db *DB, pending, inflight int64) {
	t.Helper()
	c := db.Counts()
	if c.Pending != pending || c.Inflight != inflight {
		t.Fatalf("counts: pending %d inflight %d, want %d and %d", c.Pending, c.Inflight, pending, inflight)
	}
	if _, total := recount(t, db); total.Pending != pending || total.Inflight != inflight {
		t.Fatalf("index: pending %d inflight %d, want %d and %d", total.Pending, total.Inflight, pending, inflight)
	}
}

// A commit claims for the receiver as many rows as the grant holds, with the rows and hooks it wrote; the rest
// go due and are claimed as ever, and the receiver's rows settle like any claimed row.
func TestFreshClaimsTakeTheGrantAndSettle(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var box freshBox
	db.SetFresh(box.take, nil)
	grant(db, 2, 1<<20)
	recs := makeRecords(t, 3, "acme")
	first, err := db.CommitHooks(recs)
	if err != nil {
		t.Fatal(err)
	}
	got := box.got()
	if len(got) != 2 || got[0].Seq != first || got[1].Seq != first+1 {
		t.Fatalf("fresh claims %+v, want seqs %d and %d", got, first, first+1)
	}
	for i, c := range got {
		want, _ := DecodeHook(recs[i].Value)
		if c.Hook == nil || c.Hook.ID != want.ID || !bytes.Equal(c.Hook.Body, want.Body) || c.Row.Source != "src" ||
			c.Row.State != StatePending || c.Size != 64 || !c.sole {
			t.Fatalf("fresh claim %d: %+v, hook %+v", i, c, c.Hook)
		}
	}
	wantCounts(t, db, 1, 2)
	if n := db.FreshTaken(); n != 2 {
		t.Fatalf("FreshTaken %d, want 2", n)
	}
	// The grant is spent: the third row waits for a claim.
	claimed, err := db.ClaimDue(got[0].Ord, time.Now().UnixMilli()+1, 10, 0, nil)
	if err != nil || len(claimed) != 1 || claimed[0].Seq != first+2 {
		t.Fatalf("ClaimDue: %+v, %v; want the third row alone", claimed, err)
	}
	for i := range got {
		if err := db.Complete(&got[i]); err != nil {
			t.Fatalf("Complete fresh row %d: %v", i, err)
		}
	}
	if err := db.Reschedule(&claimed[0], 1, time.Now().UnixMilli()+60_000, "later"); err != nil {
		t.Fatal(err)
	}
	if seqs := hookTenantSeqs(t, db); len(seqs) != 1 {
		t.Fatalf("hooks left %v, want the rescheduled one's alone", seqs)
	}
	c := db.Counts()
	if c.Inflight != 0 || c.Scheduled != 1 {
		t.Fatalf("counts after the outcomes: %+v", c)
	}
}

// Ordered sinks, tenants the grant leaves out, tenants the receiver skips and bodies larger than what the grant
// leaves of its bytes go due.
func TestFreshClaimsSkipOrderedFullAndLarge(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var box freshBox
	db.SetFresh(box.take, map[string]struct{}{"windowed": {}})
	if _, err := db.CommitHooks([]*Record{makeRecord(t, "full", 8, SinkBinding{Type: "http"})}); err != nil {
		t.Fatal(err)
	}
	fullOrd, _ := db.TenantOrdinal("full")
	grant(db, 100, 100, fullOrd)
	recs := []*Record{
		makeRecord(t, "acme", 8, SinkBinding{Index: 0, Type: "http", Ordered: true}, SinkBinding{Index: 1, Type: "http"}),
		makeRecord(t, "full", 8, SinkBinding{Type: "http"}),
		makeRecord(t, "windowed", 8, SinkBinding{Type: "http"}),
		makeRecord(t, "acme", 200, SinkBinding{Type: "http"}),
		makeRecord(t, "acme", 90, SinkBinding{Type: "http"}),
		makeRecord(t, "acme", 8, SinkBinding{Type: "http"}),
	}
	first, err := db.CommitHooks(recs)
	if err != nil {
		t.Fatal(err)
	}
	got := box.got()
	// The unordered sink of the first hook (8 bytes), then the 90-byte body; the last 8 bytes no longer fit.
	if len(got) != 2 || got[0].Seq != first || got[0].Sink != 1 || got[0].sole || got[1].Seq != first+4 {
		t.Fatalf("fresh claims %+v", got)
	}
	if got[0].Row.Ordered {
		t.Fatal("an ordered row was claimed fresh")
	}
	wantCounts(t, db, 6, 2)
	select {
	case <-db.Notify():
	default:
		t.Fatal("a commit that left rows due did not wake dispatch")
	}

	// A commit whose every row was claimed fresh wakes nobody: there is nothing to scan for.
	grant(db, 10, 1<<20)
	if _, err := db.CommitHooks(makeRecords(t, 2, "acme")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-db.Notify():
		t.Fatal("a commit whose rows were all claimed fresh woke dispatch")
	default:
	}
	// One ordered row beside a fresh one of the same hook is due, and wakes dispatch.
	if _, err := db.CommitHooks([]*Record{makeRecord(t, "acme", 8, SinkBinding{Index: 0, Type: "http"},
		SinkBinding{Index: 1, Type: "http", Ordered: true})}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-db.Notify():
	default:
		t.Fatal("a commit that left an ordered row due did not wake dispatch")
	}
}

// A commit whose write fails hands nothing out and gives its take back; a receiver replaced by SetFresh gets
// nothing more, and nil turns fresh claims off.
func TestFreshClaimsFailedCommitAndReplacedReceiver(t *testing.T) {
	g := newGate()
	db := openTest(t, t.TempDir(), &Faults{BeforeCommit: g.beforeCommit})
	var old, cur freshBox
	db.SetFresh(old.take, nil)
	grant(db, 1, 1<<20)
	g.failNext(errors.New("injected"))
	if _, err := db.CommitHooks(makeRecords(t, 1, "acme")); err == nil {
		t.Fatal("the injected failure did not fail the commit")
	}
	if len(old.got()) != 0 {
		t.Fatal("a failed commit handed rows out")
	}
	var out int
	db.GrantFresh(func(rows int, _ int64) FreshGrant { out = rows; return FreshGrant{Rows: 1, Bytes: 1 << 20} })
	if out != 0 {
		t.Fatalf("rows out after a failed commit: %d, want 0", out)
	}
	if _, err := db.CommitHooks(makeRecords(t, 2, "acme")); err != nil {
		t.Fatal(err)
	}
	if len(old.got()) != 1 {
		t.Fatalf("the receiver got %d rows, want the grant's 1", len(old.got()))
	}
	db.GrantFresh(func(rows int, _ int64) FreshGrant { out = rows; return FreshGrant{} })
	if out != 1 {
		t.Fatalf("rows out %d, want 1", out)
	}

	db.SetFresh(cur.take, nil)
	grant(db, 5, 1<<20)
	if _, err := db.CommitHooks(makeRecords(t, 1, "acme")); err != nil {
		t.Fatal(err)
	}
	if len(old.got()) != 1 || len(cur.got()) != 1 {
		t.Fatalf("old receiver %d rows, new %d; want 1 and 1", len(old.got()), len(cur.got()))
	}
	db.SetFresh(nil, nil)
	grant(db, 5, 1<<20)
	if _, err := db.CommitHooks(makeRecords(t, 1, "acme")); err != nil {
		t.Fatal(err)
	}
	if len(cur.got()) != 1 {
		t.Fatal("rows were claimed fresh with no receiver")
	}
	wantCounts(t, db, 2, 2)
}

// A row claimed fresh and never settled is a claimed row after a crash: the reopened store's RecoverInflight
// makes it due again, so it is delivered (at least once).
func TestFreshClaimsRecoveredAfterReopen(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	var box freshBox
	db.SetFresh(box.take, nil)
	grant(db, 10, 1<<20)
	first, err := db.CommitHooks(makeRecords(t, 3, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	got := box.got()
	if len(got) != 3 {
		t.Fatalf("fresh claims %d, want 3", len(got))
	}
	if err := db.Complete(&got[0]); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	wantCounts(t, db, 0, 2)
	n, err := db.RecoverInflight()
	if err != nil || n != 2 {
		t.Fatalf("RecoverInflight: %d, %v; want 2", n, err)
	}
	claimed, err := db.ClaimDue(got[0].Ord, time.Now().UnixMilli()+1, 10, 0, nil)
	if err != nil || len(claimed) != 2 || claimed[0].Seq != first+1 || claimed[1].Seq != first+2 {
		t.Fatalf("ClaimDue after the reopen: %+v, %v", claimed, err)
	}
}
