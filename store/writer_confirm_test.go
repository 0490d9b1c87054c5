package store

import (
	"errors"
	"testing"
	"time"
)

// heldConfirmer is a ConfirmingCommitter over a DB whose confirms wait until the test releases them, one
// channel per commit in order.
type heldConfirmer struct {
	db        *DB
	committed chan int        // len(recs) of each local write, after it returned
	release   chan chan error // each commit takes the next channel its confirm waits on
}

func (h *heldConfirmer) CommitHooks(recs []*Record) (uint64, error) { return h.db.CommitHooks(recs) }

func (h *heldConfirmer) CommitHooksConfirm(recs []*Record) (func() error, error) {
	if _, err := h.db.CommitHooks(recs); err != nil {
		return nil, err
	}
	wait := <-h.release
	h.committed <- len(recs)
	return func() error { return <-wait }, nil
}

// Seed, wal dual: "The writer's reply is a message, not a wait: the next batch commits while the previous one
// waits for its confirm." A second group is written while the first awaits its confirm; each record is
// answered only by its own group's confirm, in whatever order the confirms come, and a failed confirm answers
// its records with the error.
func TestWriterCommitsTheNextGroupWhileThePreviousAwaitsItsConfirm(t *testing.T) {
	db := openWith(t, Options{Dir: t.TempDir()})
	h := &heldConfirmer{db: db, committed: make(chan int, 8), release: make(chan chan error, 8)}
	system := quietSystem()
	defer system.Shutdown()
	pid := system.Root.Spawn(NewWriterProps(h, WriterOptions{}))
	defer func() { _ = system.Root.StopFuture(pid).Wait() }()
	first, second := make(chan error, 1), make(chan error, 1)
	h.release <- first
	h.release <- second

	p1, p2 := NewPending(), NewPending()
	p1.Record = *makeRecord(t, "acme", 8, SinkBinding{Type: "http"})
	p2.Record = *makeRecord(t, "acme", 8, SinkBinding{Type: "http"})
	system.Root.Send(pid, &Batch{Records: []*Pending{p1}})
	awaitCommitted := func(what string) {
		t.Helper()
		select {
		case <-h.committed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no local write within 10s", what)
		}
	}
	awaitCommitted("first group")
	system.Root.Send(pid, &Batch{Records: []*Pending{p2}})
	awaitCommitted("second group, while the first awaits its confirm")
	select {
	case r := <-p1.Done:
		t.Fatalf("first record answered %+v before its confirm", r)
	case r := <-p2.Done:
		t.Fatalf("second record answered %+v before its confirm", r)
	case <-time.After(50 * time.Millisecond):
	}

	second <- nil
	select {
	case r := <-p2.Done:
		if r.Err != nil || r.Seq != 2 {
			t.Fatalf("second record: %+v, want committed at seq 2", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second record not answered after its confirm")
	}
	errLog := errors.New("log refused")
	first <- errLog
	select {
	case r := <-p1.Done:
		if !errors.Is(r.Err, errLog) {
			t.Fatalf("first record: %+v, want the confirm's error", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("first record not answered after its confirm")
	}
}
