package edge

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
)

// The pen writer owns its commit task: stopping it waits for the write in flight, so
// whoever closes the store next never closes it under a pen write, and every answer of
// the group is decided before the writer is gone.
func TestPenWriterStopWaitsForItsWrite(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	db, err := store.Open(store.Options{Dir: t.TempDir(), Log: zerolog.Nop(), Faults: &store.Faults{BeforeCommit: func() error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	defer system.Shutdown()
	e := New(Settings{Instance: "pen"}, system, nil, nil, telemetry.New("pen", zerolog.Nop()), &Health{})
	e.SetStore(func() *store.DB { return db })
	pid := system.Root.Spawn(NewPenProps(e))

	w := &penWrite{done: make(chan error, 1), entry: store.QuarantineEntry{
		Hook:   store.Hook{ID: [16]byte{1}, ReceivedAt: time.Now().UnixMilli(), Tenant: "acme", Source: "pen", Body: []byte("forged")},
		Method: "POST", Path: "/webhooks/pen", Reason: "no_match",
	}}
	system.Root.Send(pid, w)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the pen write never started")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- system.Root.StopFuture(pid).Wait() }()
	select {
	case err := <-stopped:
		close(release)
		t.Fatalf("the pen writer stopped (%v) while its write was in flight", err)
	case <-time.After(200 * time.Millisecond): // a stop that does not wait returns at once
	}
	close(release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pen writer did not stop once its write ended")
	}
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("the held write failed: %v", err)
		}
	default:
		t.Fatal("the pen writer stopped with its write unanswered")
	}
	if _, n := db.QuarantineStats(); n != 1 {
		t.Fatalf("pen holds %d entries after the write, want 1", n)
	}
}
