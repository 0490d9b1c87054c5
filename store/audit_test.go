package store

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestAuditedCommitsChangeAndRowTogether(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	row, err := db.CommitAudited(AuditEntry{Actor: "ops", Client: "127.0.0.1:5", RequestID: "r1",
		Action: "source.put", Subject: "source:acme/gh", Tenant: "acme", After: []byte("spec-1")},
		AuditOp{Key: []byte("s:acme\x00gh"), Value: []byte("spec-1")})
	if err != nil {
		t.Fatal(err)
	}
	if row.Seq != 1 || row.Revision != 1 || row.Status != AuditOK || row.BeforeHash != "" || row.AfterHash == "" {
		t.Fatalf("first row = %+v", row)
	}
	row2, err := db.CommitAudited(AuditEntry{Actor: "ops", Action: "source.put", Subject: "source:acme/gh",
		Tenant: "acme", Before: []byte("spec-1"), After: []byte("spec-2")},
		AuditOp{Key: []byte("s:acme\x00gh"), Value: []byte("spec-2")})
	if err != nil {
		t.Fatal(err)
	}
	if row2.Seq != 2 || row2.Revision != 2 || row2.BeforeHash != row.AfterHash {
		t.Fatalf("second row = %+v (first %+v)", row2, row)
	}
	// A no-op writes nothing.
	if _, err := db.CommitAudited(AuditEntry{Actor: "ops", Action: "source.put", Subject: "source:acme/gh",
		Before: []byte("spec-2"), After: []byte("spec-2")}); !errors.Is(err, ErrNoChange) {
		t.Fatalf("no-op: %v", err)
	}
	_ = db.Close()

	db = openTest(t, dir, nil)
	rows, err := db.ListAudit(AuditFilter{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Seq != 1 || rows[1].Seq != 2 {
		t.Fatalf("rows after reopen = %+v", rows)
	}
	v, err := db.getCF(cfDefault, []byte("s:acme\x00gh"))
	if err != nil || !bytes.Equal(v, []byte("spec-2")) {
		t.Fatalf("subject after reopen = %q, %v", v, err)
	}
	row3, err := db.CommitAudited(AuditEntry{Actor: "ops", Action: "source.delete", Subject: "source:acme/gh",
		Before: []byte("spec-2")}, AuditOp{Key: []byte("s:acme\x00gh"), Delete: true})
	if err != nil || row3.Seq != 3 || row3.Revision != 3 || row3.AfterHash != "" {
		t.Fatalf("row after reopen = %+v, %v", row3, err)
	}
	if h, _ := db.AuditHash([]byte("spec-2")); h != row2.AfterHash {
		t.Fatalf("the audit key changed across a reopen")
	}
}

func TestAuditedRefusedWhenRowCannotBeWritten(t *testing.T) {
	fail := errors.New("IO error: injected")
	db := openTest(t, t.TempDir(), &Faults{BeforeAudit: func() error { return fail }})
	_, err := db.CommitAudited(AuditEntry{Actor: "ops", Action: "x", Subject: "s", After: []byte("1")},
		AuditOp{Key: []byte("s:t\x00n"), Value: []byte("1")})
	if !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("err = %v, want a write failure", err)
	}
	if v, _ := db.getCF(cfDefault, []byte("s:t\x00n")); v != nil {
		t.Fatal("the change was written without its row")
	}
	if rows, _ := db.ListAudit(AuditFilter{}, 10); len(rows) != 0 {
		t.Fatalf("rows = %+v", rows)
	}
}

func TestAuditPendingAndFilters(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	p, err := db.BeginAudit(AuditEntry{Actor: "ops", Action: "route.put", Subject: "route:r1", Tenant: "a",
		Before: []byte("old"), After: []byte("new")})
	if err != nil || p.Status != AuditPending {
		t.Fatalf("begin = %+v, %v", p, err)
	}
	if _, err := db.CommitAudited(AuditEntry{Actor: "ops", Action: "x", Subject: "s", Tenant: "b",
		After: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	pend, err := db.ListAudit(AuditFilter{Pending: true}, 10)
	if err != nil || len(pend) != 1 || pend[0].Seq != p.Seq {
		t.Fatalf("pending = %+v, %v", pend, err)
	}
	if _, err := db.FinishAudit(pend[0], AuditOK); err != nil {
		t.Fatal(err)
	}
	if pend, _ := db.ListAudit(AuditFilter{Pending: true}, 10); len(pend) != 0 {
		t.Fatalf("still pending: %+v", pend)
	}
	if rows, _ := db.ListAudit(AuditFilter{Tenants: []string{"b"}}, 10); len(rows) != 1 || rows[0].Tenant != "b" {
		t.Fatalf("tenant b rows = %+v", rows)
	}
	if rows, _ := db.ListAudit(AuditFilter{Tenants: []string{}}, 10); len(rows) != 0 {
		t.Fatalf("no tenant rows = %+v", rows)
	}
	if rows, _ := db.ListAudit(AuditFilter{After: 1}, 10); len(rows) != 1 || rows[0].Seq != 2 {
		t.Fatalf("rows after 1 = %+v", rows)
	}
}

func TestPruneAuditKeepsRowsAtOrAboveCursor(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	for i := range 4 {
		if _, err := db.CommitAudited(AuditEntry{Actor: "ops", Action: "x", Subject: "s", Lifecycle: true,
			Entity: []byte("e"), Before: []byte{byte(i)}, After: []byte{byte(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	future := time.Now().Add(time.Hour).UnixMilli()
	if err := db.SetLifecycleCursor(2); err != nil {
		t.Fatal(err)
	}
	del, blocked, err := db.PruneAudit(future, true)
	if err != nil || del != 2 || blocked != 2 {
		t.Fatalf("prune = %d deleted, %d blocked, %v", del, blocked, err)
	}
	rows, _ := db.ListAudit(AuditFilter{}, 10)
	if len(rows) != 2 || rows[0].Seq != 3 {
		t.Fatalf("rows left = %+v", rows)
	}
	if e, _ := db.AuditEntity(1); e != nil {
		t.Fatal("the entity of a pruned row is left")
	}
	if e, _ := db.AuditEntity(3); string(e) != "e" {
		t.Fatal("the entity of a kept row is gone")
	}
}

// Retention never passes a lifecycle replay job's cursor: with the live cursor past every row, a running (or
// paused) lifecycle job at seq 1 keeps rows 2..4 however old; once it is cancelled they go.
func TestPruneAuditHoldsForLifecycleReplay(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	for i := range 4 {
		if _, err := db.CommitAudited(AuditEntry{Actor: "ops", Action: "x", Subject: "s", Lifecycle: true,
			Entity: []byte("e"), Before: []byte{byte(i)}, After: []byte{byte(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SetLifecycleCursor(4); err != nil {
		t.Fatal(err)
	}
	j, err := NewReplayJob(ReplayJob{Kind: ReplayKindLifecycle}, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutReplayJob(&j); err != nil {
		t.Fatal(err)
	}
	if j, err = db.AdvanceReplayJob(j.ID, 1, 1, false); err != nil || store64(j.Cursor) != 1 || j.Moved != 1 {
		t.Fatalf("advance = %+v, %v", j, err)
	}
	future := time.Now().Add(time.Hour).UnixMilli()
	for _, state := range []string{"running", "paused"} {
		if _, err := db.SteerReplayJob(j.ID, state); err != nil {
			t.Fatal(err)
		}
		del, blocked, err := db.PruneAudit(future, true)
		if err != nil || blocked != 3 {
			t.Fatalf("prune with a %s replay job at seq 1 = %d deleted, %d blocked, %v; want 3 blocked", state, del, blocked, err)
		}
		if rows, _ := db.ListAudit(AuditFilter{}, 10); len(rows) != 3 || rows[0].Seq != 2 {
			t.Fatalf("rows left with a %s job = %+v", state, rows)
		}
	}
	if _, err := db.SteerReplayJob(j.ID, "cancelled"); err != nil {
		t.Fatal(err)
	}
	if del, blocked, err := db.PruneAudit(future, true); err != nil || del != 3 || blocked != 0 {
		t.Fatalf("prune after the job's cancel = %d deleted, %d blocked, %v", del, blocked, err)
	}
	// A cancelled job stays cancelled, and a step recorded after the cancel does not revive it.
	if j, err := db.AdvanceReplayJob(j.ID, 4, 0, true); err != nil || j.State != "cancelled" {
		t.Fatalf("advance after cancel = %+v, %v", j, err)
	}
	if j, err := db.SteerReplayJob(j.ID, "running"); err != nil || j.State != "cancelled" {
		t.Fatalf("resume after cancel = %+v, %v", j, err)
	}
}

// A lifecycle job's window is [since, until) ending by now (0: now) with no source filter.
func TestNewLifecycleReplayJobWindow(t *testing.T) {
	now := time.Now()
	ms := now.UnixMilli()
	j, err := NewReplayJob(ReplayJob{Kind: ReplayKindLifecycle, Since: 5}, now)
	if err != nil || j.Until != ms || j.Since != 5 || j.Rate != DefaultReplayRate {
		t.Fatalf("until 0: %+v, %v", j, err)
	}
	for _, bad := range []ReplayJob{{Since: 10, Until: 10}, {Since: 10, Until: 5}, {Until: ms + 1000}, {Since: -1},
		{Source: "gh"}} {
		bad.Kind = ReplayKindLifecycle
		if _, err := NewReplayJob(bad, now); !errors.Is(err, ErrReplayJob) {
			t.Fatalf("%+v accepted (%v)", bad, err)
		}
	}
}

func store64(b []byte) uint64 {
	j := ReplayJob{Cursor: b}
	return LifecycleReplayCursor(&j)
}

func TestSettleAuditVerdicts(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	states := map[string][]byte{"route:ok": []byte("new"), "route:failed": []byte("old"), "route:other": []byte("x")}
	for _, s := range []string{"route:ok", "route:failed", "route:other", "log_level"} {
		if _, err := db.BeginAudit(AuditEntry{Actor: "ops", Action: "put", Subject: s, Before: []byte("old"),
			After: []byte("new")}); err != nil {
			t.Fatal(err)
		}
	}
	settled, err := db.SettleAudit(func(r AuditRow) ([]byte, bool, error) {
		st, ok := states[r.Subject]
		return st, ok, nil
	}, time.Now().Add(time.Second).UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"route:ok": AuditOK, "route:failed": AuditFailed, "route:other": AuditInterrupted,
		"log_level": AuditInterrupted}
	if len(settled) != 4 {
		t.Fatalf("settled %d rows", len(settled))
	}
	rows, _ := db.ListAudit(AuditFilter{}, 10)
	for _, r := range rows {
		if r.Status != want[r.Subject] {
			t.Errorf("%s: %s, want %s", r.Subject, r.Status, want[r.Subject])
		}
	}
}
