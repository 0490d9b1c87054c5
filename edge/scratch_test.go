package edge

import "testing"

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
