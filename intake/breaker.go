package intake

import "sync"

// breaker opens after `failures` consecutive failed publishes and closes at the next success (a probe's or the
// reconciler's). A pure state machine driven by its callers.
type breaker struct {
	mu       sync.Mutex
	limit    int
	failures int
	open     bool
}

func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.open
}

// record reports one publish outcome and whether the breaker is open after it.
func (b *breaker) record(ok bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.failures, b.open = 0, false
		return false
	}
	b.failures++
	if b.failures >= b.limit {
		b.open = true
	}
	return b.open
}
