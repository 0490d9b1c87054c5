package dispatch

import (
	"testing"
	"time"
)

// The set answers the smallest waiting seq whatever order rows were parked and came back in, forgets a row
// once it is claimed again, and lets go of rows overdue past the cutoff.
func TestWaitSetKeepsTheEarliestParkedRow(t *testing.T) {
	var w waitSet
	if _, _, ok := w.first(); ok || !w.empty() {
		t.Fatal("a new set has a waiting row")
	}
	w.add(19, 1000)
	w.add(17, 1001)
	w.add(18, 1001)
	w.add(17, 1005) // parked again: the later due time stands
	if seq, due, ok := w.first(); !ok || seq != 17 || due != 1005 {
		t.Fatalf("first = %d, %d, %v; want 17, 1005", seq, due, ok)
	}
	w.back(17)
	if seq, _, _ := w.first(); seq != 18 {
		t.Fatalf("after 17 came back, first = %d; want 18", seq)
	}
	w.back(42) // never parked: nothing changes
	w.back(18)
	if seq, due, _ := w.first(); seq != 19 || due != 1000 {
		t.Fatalf("after 18 came back, first = %d (due %d); want 19 (1000)", seq, due)
	}
	w.add(3, 5000)
	w.expire(time.UnixMilli(2000)) // 19 is long overdue, 3 is not
	if seq, _, _ := w.first(); seq != 3 {
		t.Fatalf("after the expiry, first = %d; want 3", seq)
	}
	w.back(3)
	if _, _, ok := w.first(); ok || !w.empty() {
		t.Fatal("every row came back, yet one still waits")
	}
	if w.order != nil {
		t.Fatal("a drained set keeps its heap's array")
	}
}

// A row parked, claimed back and parked again, over and over (a lane behind a head whose attempt is still running
// parks the rows it claims a millisecond ahead), leaves the heap no larger than a bound of the rows waiting.
func TestWaitSetHeapStaysBounded(t *testing.T) {
	var w waitSet
	w.add(1, 10) // the earliest row stays parked: nothing below it surfaces to be dropped
	for i := range 10_000 {
		w.add(2, int64(i))
		w.back(2)
	}
	if n := len(w.order); n > 2*len(w.due)+64+1 {
		t.Fatalf("the heap holds %d seqs for %d waiting rows", n, len(w.due))
	}
	if seq, _, ok := w.first(); !ok || seq != 1 {
		t.Fatalf("first = %d, %v; want 1", seq, ok)
	}
}
