package edge

import (
	"errors"
	"os"
	"sync"
	"time"
)

// lazyDeadline is one direction's deadline of a connection, armed in the runtime's poller only when it moves
// earlier. fasthttp sets four deadlines on every keep-alive request (idle, head, body, write), and each one is a
// lock and a timer update in the poller, about a microsecond of a hook's CPU for deadlines that in steady traffic
// are never reached. A deadline that moves later is left to the armed, earlier one; when that one expires, the
// expiry is recognised as early (the wanted deadline is still ahead), the poller is re-armed at the wanted one and
// the call is retried. The deadline a Read or Write meets is therefore always exactly the last one set; the
// poller is touched about once per armed period per connection instead of on every request.
type lazyDeadline struct {
	mu    sync.Mutex
	want  time.Time // the deadline last set; zero: none
	armed time.Time // the deadline the poller holds; zero: none. Never later than want while want is set.
}

// set records t as the deadline and arms it through arm when the poller's would come later or not at all.
func (d *lazyDeadline) set(t time.Time, arm func(time.Time) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.want = t
	if t.IsZero() || (!d.armed.IsZero() && !t.Before(d.armed)) {
		// No deadline wanted, or a later one: the armed one (if any) fires first and early() moves it.
		return nil
	}
	if err := arm(t); err != nil {
		return err
	}
	d.armed = t
	return nil
}

// early reports whether err is the expiry of an armed deadline that came before the wanted one; if so it re-arms
// the poller at the wanted deadline (or clears it) and the caller retries.
func (d *lazyDeadline) early(err error, arm func(time.Time) error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.want.IsZero() && !time.Now().Before(d.want) {
		return false
	}
	if arm(d.want) != nil {
		return false
	}
	d.armed = d.want
	return true
}
