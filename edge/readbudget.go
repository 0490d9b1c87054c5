package edge

import (
	"hash/maphash"
	"net"
	"sync/atomic"

	"github.com/ankusa-go/ankusa/telemetry"
)

// readBudget bounds the body bytes held by requests that are not answered yet: bodies
// being read, and read bodies waiting for verification and the commit. A request
// reserves its Content-Length before its first body byte is read (a chunked body
// reserves as its buffer grows) and gives it back when it is answered. Past the node's
// budget a request gets 503 overload, past its client address's 429 ip_overload, both
// before the body is read when the length is declared.
//
// Per address, the budget is kept in a fixed table of counters indexed by a hash of the
// address (an IPv6 /64): no lock and no allocation per request, and addresses that share
// a slot share its budget, which only ever refuses early, never admits more.
type readBudget struct {
	maxNode, maxIP int64
	node           atomic.Int64
	ip             [readBudgetSlots]atomic.Int64
	seed           maphash.Seed
	tel            *telemetry.Telemetry
}

const readBudgetSlots = 4096

var refuseIPOverload = &RefusedError{Status: 429, Reason: "ip_overload", RetryAfter: 1}

func newReadBudget(maxNode, maxIP int64, tel *telemetry.Telemetry) *readBudget {
	return &readBudget{maxNode: maxNode, maxIP: maxIP, seed: maphash.MakeSeed(), tel: tel}
}

// slot is the table index of a client address.
func (b *readBudget) slot(addr net.Addr) int {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || len(ta.IP) == 0 {
		return 0
	}
	ip := ta.IP
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	} else if len(ip) == net.IPv6len {
		ip = ip[:8] // the /64
	}
	return int(maphash.Bytes(b.seed, ip) % readBudgetSlots)
}

// reserve takes n more bytes for a request at slot, or refuses it.
func (b *readBudget) reserve(slot int, n int64) *RefusedError {
	if n <= 0 {
		return nil
	}
	if b.node.Add(n) > b.maxNode && b.maxNode > 0 {
		b.node.Add(-n)
		return refuseOverload
	}
	if b.maxIP > 0 && b.ip[slot].Add(n) > b.maxIP {
		b.ip[slot].Add(-n)
		b.node.Add(-n)
		return refuseIPOverload
	}
	b.tel.Metrics.IngestBodyBytes.Add(float64(n))
	return nil
}

// check reports the refusal reserve would give n bytes now, without taking them: the
// Expect: 100-continue answer, before the client sends its body.
func (b *readBudget) check(slot int, n int64) *RefusedError {
	if b.maxNode > 0 && b.node.Load()+n > b.maxNode {
		return refuseOverload
	}
	if b.maxIP > 0 && b.ip[slot].Load()+n > b.maxIP {
		return refuseIPOverload
	}
	return nil
}

// release gives back what reserve took.
func (b *readBudget) release(slot int, n int64) {
	if n <= 0 {
		return
	}
	b.node.Add(-n)
	if b.maxIP > 0 {
		b.ip[slot].Add(-n)
	}
	b.tel.Metrics.IngestBodyBytes.Add(-float64(n))
}

// reservation is one request's share of the read budget.
type reservation struct {
	b    *readBudget
	slot int
	held int64
}

// ensure grows the reservation to at least n bytes.
func (r *reservation) ensure(n int64) *RefusedError {
	if n <= r.held {
		return nil
	}
	if ref := r.b.reserve(r.slot, n-r.held); ref != nil {
		return ref
	}
	r.held = n
	return nil
}

// done gives the whole reservation back.
func (r *reservation) done() {
	r.b.release(r.slot, r.held)
	r.held = 0
}

// Reading reports the body bytes reserved by unanswered requests.
func (e *Edge) Reading() int64 { return e.budget.node.Load() }
