package dispatch

import (
	"container/heap"
	"time"
)

// waitSet is an ordered lane's rows put back in the store (parked) and not claimed again yet, by seq, with the
// due time each was given.
//
// Parking alone does not keep a lane in seq order: a parked row comes back at the due time it was given, and a
// later row of the lane committed before that time but claimed only after the lane's head was delivered sorts
// before it in the due index (seen: a row committed in the same millisecond as its predecessor was parked at
// that millisecond + 1 was delivered first). So an ordered lane runs a row only when no row before it is
// waiting; a later row claimed meanwhile is parked behind the earliest waiting one.
//
// The set lives with the scheduler's incarnation: a restarted scheduler starts with none, and the order across
// a restart rests on the due times alone.
type waitSet struct {
	due   map[uint64]int64 // seq → due time (unix ms) it was parked at
	order seqHeap          // the same seqs, smallest first; a seq no longer in due is dropped when it surfaces
}

// add records that row seq was parked until due.
func (w *waitSet) add(seq uint64, due int64) {
	if w.due == nil {
		w.due = make(map[uint64]int64)
	}
	if _, ok := w.due[seq]; !ok {
		if len(w.order) >= 2*len(w.due)+64 {
			w.rebuild() // seqs that came back and were parked again pile up below the top
		}
		heap.Push(&w.order, seq)
	}
	w.due[seq] = due
}

// rebuild makes the heap hold exactly the waiting seqs.
func (w *waitSet) rebuild() {
	w.order = w.order[:0]
	for seq := range w.due {
		w.order = append(w.order, seq)
	}
	heap.Init(&w.order)
}

// back records that row seq was claimed again.
func (w *waitSet) back(seq uint64) {
	if len(w.due) > 0 {
		delete(w.due, seq)
	}
}

// first is the smallest waiting seq and its due time; ok is false when none waits.
func (w *waitSet) first() (seq uint64, due int64, ok bool) {
	for w.order.Len() > 0 {
		seq = w.order[0]
		if due, ok = w.due[seq]; ok {
			return seq, due, true
		}
		heap.Pop(&w.order)
	}
	w.order = nil // the backing array of a drained heap is not kept
	return 0, 0, false
}

// waitExpiry is how many dispatch.idle_lane_ms a parked row may be overdue before its lane stops waiting for it
// (waitSet.expire).
const waitExpiry = 10

// expire forgets rows due before cutoff. A parked row comes back once it is due and claimed, so one overdue for
// long either waits behind a full claim window or left the store by another way (its tenant erased, its source
// deleted: the lane then gets no row again); the lane keeps it for ten idle-lane periods, five minutes by
// default, so the lane of a gone tenant does not stay in memory for good.
func (w *waitSet) expire(cutoff time.Time) {
	c := cutoff.UnixMilli()
	for seq, due := range w.due {
		if due < c {
			delete(w.due, seq)
		}
	}
}

func (w *waitSet) empty() bool { return len(w.due) == 0 }

// seqHeap is a min-heap of seqs (container/heap).
type seqHeap []uint64

func (h seqHeap) Len() int           { return len(h) }
func (h seqHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h seqHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *seqHeap) Push(x any)        { *h = append(*h, x.(uint64)) }
func (h *seqHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
