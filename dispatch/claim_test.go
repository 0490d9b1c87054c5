package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/poll"
)

// claimTestHook opens a store in a temp dir and commits one hook with two sink rows; it returns the store and
// the hook's seq.
func claimTestHook(t *testing.T) (*store.DB, uint64) {
	t.Helper()
	db, err := store.Open(store.Options{Dir: t.TempDir(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	h := store.Hook{ID: [16]byte{1}, ReceivedAt: time.Now().UnixMilli(), Tenant: "acme", Source: "gh", Body: make([]byte, 100)}
	rec := &store.Record{ID: h.ID, Tenant: h.Tenant, Source: h.Source, ReceivedAt: h.ReceivedAt, Size: 100,
		Value: store.AppendHook(nil, &h), Sinks: []store.SinkBinding{{Index: 0, Type: "nats"}, {Index: 1, Type: "redis"}}}
	first, err := db.CommitHooks([]*store.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	return db, first
}

// Inventory D.5: the body is "checked in once per delivery row before any sink runs … ref handed to every sink".
// The attempts of several sinks of one hook that need its claim at the same moment share one check-in, get the
// same ref, and the ref is recorded for the attempts that come later.
func TestConcurrentAttemptsOfAHookShareOneCheckIn(t *testing.T) {
	db, seq := claimTestHook(t)
	const n = 8
	var calls atomic.Int32
	release := make(chan struct{})
	d := &Dispatcher{log: zerolog.Nop(), claiming: map[uint64]*claimCall{}}
	d.SetClaimCheck(func(ctx context.Context, e *sinks.Envelope) (string, error) {
		calls.Add(1)
		<-release // every other caller arrives while this check-in runs
		return "urn:ankusa:claim:v1:acme:01J9ZQ5K8E6VX2W4Y3T1R0P9M0", nil
	})
	refs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refs[i], errs[i] = d.claimRef(context.Background(), db, seq, &sinks.Envelope{})
		}()
	}
	// One leads; the others, started before it may finish, wait for it or read what it recorded.
	poll.True(t, 5*time.Second, "a check-in started", func() bool { return calls.Load() > 0 })
	close(release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || refs[i] != refs[0] || refs[0] == "" {
			t.Fatalf("attempt %d: ref %q, %v (first %q)", i, refs[i], errs[i], refs[0])
		}
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("%d check-ins for one hook, want 1", got)
	}
	if ref, ok, err := db.ClaimRef(seq); err != nil || !ok || ref != refs[0] {
		t.Fatalf("recorded ref %q, %v, %v; want %q", ref, ok, err, refs[0])
	}
	// A later attempt (a retry, another sink) reads the marker.
	if _, err := d.claimRef(context.Background(), db, seq, &sinks.Envelope{}); err != nil || calls.Load() != 1 {
		t.Fatalf("a later attempt checked in again (%d calls, %v)", calls.Load(), err)
	}
}

// A failed check-in records nothing and fails the attempt as transient (inventory D.1: "errors fail the attempt");
// the next attempt checks in again and records the ref.
func TestFailedCheckInIsRetriedByTheNextAttempt(t *testing.T) {
	db, seq := claimTestHook(t)
	refused := errors.New("claim store down")
	var calls atomic.Int32
	d := &Dispatcher{log: zerolog.Nop(), claiming: map[uint64]*claimCall{}}
	d.SetClaimCheck(func(ctx context.Context, e *sinks.Envelope) (string, error) {
		if calls.Add(1) == 1 {
			return "", refused
		}
		return "urn:ankusa:claim:v1:acme:01J9ZQ5K8E6VX2W4Y3T1R0P9M0", nil
	})
	_, err := d.claimRef(context.Background(), db, seq, &sinks.Envelope{})
	if !errors.Is(err, refused) {
		t.Fatalf("first attempt: %v, want the check-in's error", err)
	}
	if class, _ := sinks.Classify(err); class != sinks.Transient {
		t.Fatalf("a failed check-in classified %v, want transient", class)
	}
	if _, ok, _ := db.ClaimRef(seq); ok {
		t.Fatal("a failed check-in left a marker")
	}
	ref, err := d.claimRef(context.Background(), db, seq, &sinks.Envelope{})
	if err != nil || calls.Load() != 2 {
		t.Fatalf("second attempt: %q, %v after %d check-ins", ref, err, calls.Load())
	}
	if got, ok, _ := db.ClaimRef(seq); !ok || got != ref {
		t.Fatalf("recorded %q, %v; want %q", got, ok, ref)
	}
}
