package edge

import (
	"testing"

	"github.com/ankusa-go/ankusa/store"
)

// TestPooledBodyBufferIsCapped: a scratch that read a large body does not return to the
// pool holding that buffer, so stalled or finished large uploads cannot pin memory for
// the life of the process (issue 8, item 4).
func TestPooledBodyBufferIsCapped(t *testing.T) {
	e := &Edge{}
	e.scratch.New = func() any { return newScratch() }
	sc := newScratch()
	sc.body = make([]byte, 0, 8<<20)
	e.putScratch(sc)
	if c := cap(sc.body); c > maxPooledBody {
		t.Fatalf("a pooled scratch keeps a %d-byte body buffer, cap %d", c, maxPooledBody)
	}
	small := newScratch()
	buf := small.body
	e.putScratch(small)
	if &small.body[:1][0] != &buf[:1][0] {
		t.Fatal("a small body buffer was replaced instead of kept")
	}
}

// A scratch keeps its record for the next request only once the writer answered it. A record that expired
// (its batch may still wait in the writer's queue, where the writer reads it) or was never answered is left to
// the collector: reused, its fields would be rewritten while the writer may read them.
func TestKeepPendingOnlyWhenAnswered(t *testing.T) {
	sc := newScratch()
	expired := store.NewPending()
	if !expired.Expire() {
		t.Fatal("a new record did not expire")
	}
	sc.keepPending(expired)
	if sc.pending != nil {
		t.Fatal("an expired record was kept for reuse")
	}
	sc.keepPending(store.NewPending())
	if sc.pending != nil {
		t.Fatal("a record the writer never took was kept for reuse")
	}
	if p := sc.takePending(); p == nil || p.State() != store.Waiting {
		t.Fatal("a scratch with no record kept gave no fresh one")
	}
}
