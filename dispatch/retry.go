package dispatch

import (
	"time"

	"github.com/ankusa-go/ankusa/config"
)

// maxRetryAfter caps how far a sink's Retry-After can push the next attempt.
const maxRetryAfter = time.Hour

// RetryPolicy is a source's exponential back-off with full jitter (inventory F.2):
// delay = min(base·2^(n-1), max) × U[0.5, 1], give up after MaxAttempts attempts.
type RetryPolicy struct {
	Base        time.Duration
	Max         time.Duration
	MaxAttempts int
	Jitter      bool
}

// PolicyFrom converts the config's retry section.
func PolicyFrom(r config.Retry) RetryPolicy {
	return RetryPolicy{
		Base: time.Duration(r.BaseMS) * time.Millisecond, Max: time.Duration(r.MaxMS) * time.Millisecond,
		MaxAttempts: r.MaxAttempts, Jitter: r.Jitter,
	}
}

// Backoff returns the delay before the attempt after `attempts` failed ones, or false
// when the policy gives up. u is a uniform draw in [0, 1) (the caller's random source).
func (p RetryPolicy) Backoff(attempts int, u float64) (time.Duration, bool) {
	if attempts >= p.MaxAttempts {
		return 0, false
	}
	d := p.Max
	// base·2^(n-1) without overflow: stop doubling once it passes the cap.
	if n := attempts - 1; n < 62 {
		if b := p.Base << uint(max(n, 0)); b > 0 && b < p.Max && b>>uint(max(n, 0)) == p.Base {
			d = b
		}
	}
	if p.Jitter {
		d = time.Duration(float64(d) * (0.5 + 0.5*u))
	}
	return d, true
}

// NextAttempt decides when a failed delivery is tried again: the back-off, floored by
// a sink's Retry-After (capped at an hour); false means give up.
func (p RetryPolicy) NextAttempt(attempts int, retryAfter time.Duration, u float64) (time.Duration, bool) {
	d, ok := p.Backoff(attempts, u)
	if !ok {
		return 0, false
	}
	return max(d, min(retryAfter, maxRetryAfter)), true
}
