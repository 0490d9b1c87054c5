package intake_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/poll"
)

// TestReconcilerWritesLogOnlyHooks proves the other half-persisted case (design: "A half-persisted hook (one
// half failed) is 503 to the provider and carried: the pending set holds it and the reconciler completes the
// missing half"): the local write fails while the publish holds; the caller gets the store's error, a retry is
// intake_pending, and the reconciler writes the hook from its log entry at its own seq.
func TestReconcilerWritesLogOnlyHooks(t *testing.T) {
	brokers := newCluster(t)
	l := newLog(t, brokers, "node-a")
	var fail atomic.Bool
	db := openStore(t, &store.Faults{BeforeCommit: func() error {
		if fail.Load() {
			return errors.New("injected: disk refused the write")
		}
		return nil
	}})
	d := newDual(t, db, l, "node-a")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Recover(ctx); err != nil {
		t.Fatal(err)
	}

	fail.Store(true)
	r := record(t, 0)
	confirm, err := d.CommitHooksConfirm([]*store.Record{r})
	if err != nil || confirm == nil {
		t.Fatalf("CommitHooksConfirm = %v (confirm %v), want the publish started", err, confirm != nil)
	}
	if err := confirm(); !errors.Is(err, store.ErrWriteFailed) {
		t.Fatalf("confirm = %v, want the local write's error", err)
	}
	seq := r.Outcome.Seq
	if !d.PendingID(r.ID) || d.PendingCount() != 1 {
		t.Fatalf("log-only hook not held: pending %v, count %d", d.PendingID(r.ID), d.PendingCount())
	}
	if ok, _ := db.HasHook(seq); ok {
		t.Fatal("the failed local write stored the hook")
	}
	retry := record(t, 0)
	retry.DedupeKey = r.DedupeKey
	fail.Store(false)
	d.Reconcile()
	poll.True(t, 10*time.Second, "log-only hook written", func() bool { ok, _ := db.HasHook(seq); return ok })
	if d.PendingCount() != 0 || d.PendingID(r.ID) {
		t.Fatalf("pending set still holds the hook after the reconciler wrote it")
	}
	if id, ok, err := db.LookupDedupe("t1", "src", r.DedupeKey, time.Now()); err != nil || !ok || id != r.ID {
		t.Fatalf("dedupe key after the reconciler: %x %v %v", id, ok, err)
	}
	// A retry now is a duplicate with the first id.
	confirm, err = d.CommitHooksConfirm([]*store.Record{retry})
	if err != nil {
		t.Fatal(err)
	}
	if confirm != nil {
		t.Fatal("a duplicate published something")
	}
	if retry.Outcome.Status != store.OutcomeDuplicate || retry.Outcome.OriginalID != r.ID {
		t.Fatalf("retry outcome %+v, want duplicate of %x", retry.Outcome, r.ID)
	}
	t.Logf("local write failed, publish held: hook seq %d held, reconciler wrote it; retry answered duplicate of the first id", seq)
}

// TestRetryOfAnUnconfirmedHookIsIntakePending proves the dedupe rule of dual (inventory E.7: "retry sees 503
// intake_pending, then 201 duplicate"): while a hook awaits its confirm, a commit repeating its key is refused
// ErrIntakePending; once confirmed, the same repeat is a duplicate.
func TestRetryOfAnUnconfirmedHookIsIntakePending(t *testing.T) {
	brokers := newCluster(t)
	l := newLog(t, brokers, "node-a")
	db := openStore(t, nil)
	d := newDual(t, db, l, "node-a")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	r := record(t, 0)
	confirm, err := d.CommitHooksConfirm([]*store.Record{r})
	if err != nil {
		t.Fatal(err)
	}
	retry := record(t, 0)
	_, err = d.CommitHooksConfirm([]*store.Record{retry})
	if err != nil {
		t.Fatal(err)
	}
	if retry.Outcome.Status != store.OutcomeRefused || !errors.Is(retry.Outcome.Err, store.ErrIntakePending) {
		t.Fatalf("retry before the confirm: %+v, want refused intake_pending", retry.Outcome)
	}
	if err := confirm(); err != nil {
		t.Fatal(err)
	}
	again := record(t, 0)
	if _, err := d.CommitHooksConfirm([]*store.Record{again}); err != nil {
		t.Fatal(err)
	}
	if again.Outcome.Status != store.OutcomeDuplicate || again.Outcome.OriginalID != r.ID {
		t.Fatalf("retry after the confirm: %+v, want duplicate of %x", again.Outcome, r.ID)
	}
}
