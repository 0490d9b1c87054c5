package edge

import (
	"sync/atomic"
	"time"
)

// storeHealth is the store's part of Health. The store is ready while it is open, its
// last write did not fail and no commit has run past the stall bound. After a failed
// write /ready stays 503 until a write succeeds: the store owner reopens the store and
// probes it (docs/architecture.md, "Store recovery").
type storeHealth struct {
	storeOpen     atomic.Bool
	writeFailing  atomic.Bool  // a write failed and none succeeded since
	downSinceNs   atomic.Int64 // when the store stopped taking writes (a failed write, a close); 0 while it takes them
	stalledSince  atomic.Int64 // start of the commit the watchdog reported running too long; 0 when none
	commitStartNs atomic.Int64 // start of the commit running now; 0 when none
}

// storeNotReady is the store check's value when the store is not ready, "" when it is.
func (h *storeHealth) storeNotReady() string {
	switch {
	case !h.storeOpen.Load():
		return "store_unavailable"
	case h.writeFailing.Load():
		return "write_failed"
	case h.stalledSince.Load() != 0:
		return "commit_stalled"
	}
	return ""
}

// SetStoreOpen records whether the store is open. A close makes the store unavailable
// until a write succeeds; an open alone does not make it available again.
func (h *storeHealth) SetStoreOpen(open bool) {
	h.storeOpen.Store(open)
	if !open {
		h.downSinceNs.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// WriteFailed records a failed store write: /ready is 503 write_failed until one succeeds.
func (h *storeHealth) WriteFailed(now time.Time) {
	h.writeFailing.Store(true)
	h.downSinceNs.CompareAndSwap(0, now.UnixNano())
}

// WriteSucceeded records a successful store write. On the usual path it only loads.
func (h *storeHealth) WriteSucceeded() {
	if h.writeFailing.Load() {
		h.writeFailing.Store(false)
	}
	if h.downSinceNs.Load() != 0 {
		h.downSinceNs.Store(0)
	}
}

// StoreUnavailable is how long the store has been unable to take writes: since the first
// failed write or close not yet followed by a successful write; 0 while it takes them.
func (h *storeHealth) StoreUnavailable(now time.Time) time.Duration {
	if since := h.downSinceNs.Load(); since != 0 {
		return max(now.Sub(time.Unix(0, since)), 0)
	}
	return 0
}

// CommitStarted and CommitEnded bracket one synced commit, for the stall watchdog.
func (h *storeHealth) CommitStarted(now time.Time) { h.commitStartNs.Store(now.UnixNano()) }

// CommitEnded ends what CommitStarted began, and clears a stall the watchdog reported.
func (h *storeHealth) CommitEnded() {
	h.commitStartNs.Store(0)
	if h.stalledSince.Load() != 0 {
		h.stalledSince.Store(0)
	}
}

// CheckStall is the watchdog's check. When the commit running now has run longer than
// bound and was not reported yet, it marks it (/ready is 503 commit_stalled until the
// commit returns) and reports how long it has run; otherwise it reports 0. The commit
// itself is never abandoned: its callers wait for it, since it may still land.
func (h *storeHealth) CheckStall(now time.Time, bound time.Duration) time.Duration {
	start := h.commitStartNs.Load()
	if start == 0 || h.stalledSince.Load() == start {
		return 0
	}
	d := now.Sub(time.Unix(0, start))
	if d <= bound {
		return 0
	}
	h.stalledSince.Store(start)
	if h.commitStartNs.Load() != start {
		// It returned between the two loads; CommitEnded may have run before the mark.
		h.stalledSince.CompareAndSwap(start, 0)
		return 0
	}
	return d
}
