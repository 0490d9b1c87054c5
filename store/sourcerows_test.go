package store

import (
	"errors"
	"testing"
	"time"
)

// A source's rows are counted (waiting and in flight) within its tenant's ranges only; a delete without
// DeadLetter is refused with the counts and writes nothing; a delete whose audit row cannot be written buries
// nothing; with DeadLetter the waiting rows are dead-lettered ({source_gone, id}) in the batch of the change
// and its row, the counters follow (and survive a reopen), and the row in flight is left to its outcome.
func TestAuditedSourceDeleteCountsAndBuries(t *testing.T) {
	dir := t.TempDir()
	var failAudit bool
	db := openTest(t, dir, &Faults{BeforeAudit: func() error {
		if failAudit {
			return errors.New("injected: audit write fails")
		}
		return nil
	}})
	recs := makeRecords(t, 3, "acme")
	other := makeRecord(t, "acme", 64, SinkBinding{Index: 0, Type: "http"})
	other.Source = "other"
	beta := makeRecord(t, "beta", 64, SinkBinding{Index: 0, Type: "http"}) // source "src" of another tenant
	if _, err := db.CommitHooks(append(recs, other, beta)); err != nil {
		t.Fatal(err)
	}
	ord, _ := db.TenantOrdinal("acme")
	claimed, err := db.ClaimDue(ord, time.Now().UnixMilli()+1000, 1, 0, nil)
	if err != nil || len(claimed) != 1 || claimed[0].Row.Source != "src" {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	n, err := db.CountSourceRows("acme", "src")
	if err != nil || n != (SourceRows{Pending: 2, Inflight: 1}) {
		t.Fatalf("count = %+v, %v; want 2 pending, 1 in flight", n, err)
	}
	if n, _ := db.CountSourceRows("nobody", "src"); n.Busy() {
		t.Fatalf("a tenant with no ordinal has rows: %+v", n)
	}

	if _, err := db.CommitAudited(AuditEntry{Actor: "ops", Action: "source.create", Subject: "source:acme/src",
		Tenant: "acme", After: []byte("spec")}, AuditOp{Key: SourceKey("acme", "src"), Value: []byte("spec")}); err != nil {
		t.Fatal(err)
	}
	del := func(deadLetter bool) (AuditRow, error) {
		row, _, err := db.AuditedSourceDelete(SourceDelete{Tenant: "acme", Source: "src", DeadLetter: deadLetter, At: 42},
			func(AuditReader) (AuditEntry, []AuditOp, error) {
				return AuditEntry{Actor: "ops", Action: "source.delete", Subject: "source:acme/src", Tenant: "acme",
					Before: []byte("spec")}, []AuditOp{{Key: SourceKey("acme", "src"), Delete: true}}, nil
			})
		return row, err
	}
	rowsBefore, _ := db.ListAudit(AuditFilter{}, 100)
	var busy *SourceHasDeliveriesError
	if _, err := del(false); !errors.As(err, &busy) || busy.Pending != 2 || busy.Inflight != 1 {
		t.Fatalf("delete with rows: %v", err)
	}
	if rows, _ := db.ListAudit(AuditFilter{}, 100); len(rows) != len(rowsBefore) {
		t.Fatalf("a refused delete wrote an audit row")
	}
	failAudit = true
	if _, err := del(true); err == nil {
		t.Fatal("a delete whose audit row cannot be written succeeded")
	}
	failAudit = false
	if c := db.TenantCounts(ord); c.Pending != 3 || c.Inflight != 1 || c.Dead != 0 {
		t.Fatalf("after a failed delete acme counts %+v", c)
	}
	if _, err := del(true); err != nil {
		t.Fatal(err)
	}
	if v, _ := db.getCF(cfDefault, SourceKey("acme", "src")); v != nil {
		t.Fatal("the source key survived its delete")
	}
	dead, err := db.ListDead("src", 10)
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead = %+v, %v; want 2", dead, err)
	}
	for _, d := range dead {
		if d.Reason != "{source_gone, src}" || d.DeadAt != 42 || d.Tenant != "acme" {
			t.Fatalf("dead entry %+v", d)
		}
	}
	if c := db.TenantCounts(ord); c.Pending != 1 || c.Inflight != 1 || c.Dead != 2 {
		t.Fatalf("acme counts %+v: want other's 1 pending, 1 in flight, 2 dead", c)
	}
	// The row in flight settles as its attempt ends; then nothing of src is left to deliver.
	if err := db.Bury(&claimed[0], 1, SourceGoneReason("src"), 43); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.CountSourceRows("acme", "src"); n.Busy() {
		t.Fatalf("rows left: %+v", n)
	}
	bord, _ := db.TenantOrdinal("beta")
	if c := db.TenantCounts(bord); c.Pending != 1 || c.Dead != 0 {
		t.Fatalf("beta's src row was touched: %+v", c)
	}
	_ = db.Close()
	db = openTest(t, dir, nil)
	per, _ := recount(t, db)
	for o, want := range per {
		if got := db.TenantCounts(o); got.Pending != want.Pending || got.Scheduled != want.Scheduled ||
			got.Inflight != want.Inflight || got.Dead != want.Dead || got.PendingBytes != want.PendingBytes {
			t.Fatalf("tenant %d counters after reopen %+v, recount %+v", o, got, want)
		}
	}
}
