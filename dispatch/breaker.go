package dispatch

import "time"

// breaker is one sink key's circuit breaker (inventory F.3). It opens after `failures`
// consecutive non-permanent failures; while open the key's rows are parked (due again
// at the period's end, attempts unchanged); the period starts at openFor and doubles
// per consecutive opening up to maxOpen; after it one probe is let through: success
// closes it, failure opens it again for longer. A permanent answer to a probe closes it
// too: the destination answered. It is a pure state machine driven by the scheduler.
type breaker struct {
	failures int           // threshold; 0 disables the breaker
	openFor  time.Duration // first open period
	maxOpen  time.Duration

	consecutive int
	openings    int       // consecutive openings, for the doubling
	until       time.Time // open until; zero when closed
	probing     bool      // one probe is out
}

type breakerState uint8

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerHalfOpen
)

// state reports the breaker's state at now.
func (b *breaker) state(now time.Time) breakerState {
	switch {
	case b.until.IsZero():
		return breakerClosed
	case now.Before(b.until):
		return breakerOpen
	default:
		return breakerHalfOpen
	}
}

// allow reports whether an attempt may start at now; in half-open state only one probe
// is allowed at a time. When false, openUntil says when to park the row to.
func (b *breaker) allow(now time.Time) (ok bool, openUntil time.Time) {
	switch b.state(now) {
	case breakerClosed:
		return true, time.Time{}
	case breakerOpen:
		return false, b.until
	default:
		if b.probing {
			return false, now.Add(b.openFor)
		}
		b.probing = true
		return true, time.Time{}
	}
}

// success records a confirmed delivery (or a permanent answer): the breaker closes.
// It reports whether the breaker changed state.
func (b *breaker) success() bool {
	changed := !b.until.IsZero()
	b.consecutive, b.openings, b.until, b.probing = 0, 0, time.Time{}, false
	return changed
}

// failure records a transient failure at now; it reports whether the breaker opened.
func (b *breaker) failure(now time.Time) bool {
	if b.failures <= 0 {
		return false
	}
	b.consecutive++
	if b.probing || (b.until.IsZero() && b.consecutive >= b.failures) {
		period := b.openFor << uint(min(b.openings, 30))
		if period <= 0 || period > b.maxOpen {
			period = b.maxOpen
		}
		b.openings++
		b.until = now.Add(period)
		b.probing = false
		return true
	}
	return false
}

// aborted releases a probe slot whose attempt never reported (a parked row).
func (b *breaker) aborted() { b.probing = false }
