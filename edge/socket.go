package edge

import (
	"net"
	"sync"
	"time"
)

// socketParkTimeout bounds how long a socket nobody took over stays open: a listener
// stopped by a restart is started again within milliseconds, one stopped because its
// domain gave up never is, and a client must not wait in the backlog for it.
const socketParkTimeout = 2 * time.Second

// socketKeeper holds the ingest socket between the listener's incarnations.
//
// The listener is the last child of the edge (rest-for-one): a crash of the writer or of
// a batcher stops and starts it again. Closing the socket there would refuse every
// connection made during the restart and reset the keep-alive connections' next request,
// and the clients back off on both; so a stopping listener parks the bound socket here
// and the next one serves it, a connection made meanwhile waiting in the kernel's backlog
// for the few milliseconds the restart takes. A stop for good (drain, instance stop)
// closes the socket at once, and a parked socket nobody took within socketParkTimeout is
// closed too (the domain gave up).
type socketKeeper struct {
	mu     sync.Mutex
	ln     *net.TCPListener // parked; nil while a listener serves it, or when closed
	conns  []net.Conn       // accepted by a stopping listener after its stop began: the next one serves them
	timer  *time.Timer
	closed bool // stopped for good: sockets handed back are closed
}

// take returns the parked socket (and the connections it accepted while stopping) for
// a starting listener, or nil when there is none and the listener binds its own.
func (k *socketKeeper) take() (*net.TCPListener, []net.Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ln == nil || k.closed {
		return nil, nil
	}
	ln, conns := k.ln, k.conns
	k.ln, k.conns = nil, nil
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	if err := ln.SetDeadline(time.Time{}); err != nil { // undo the stopping view's wake-up
		_ = ln.Close()
		closeAll(conns)
		return nil, nil
	}
	return ln, conns
}

// park keeps a stopped listener's socket for the next one, or closes it when the edge
// is stopping for good.
func (k *socketKeeper) park(ln *net.TCPListener, conns []net.Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.ln != nil {
		_ = ln.Close()
		closeAll(conns)
		return
	}
	k.ln, k.conns = ln, conns
	k.timer = time.AfterFunc(socketParkTimeout, func() { k.expire(ln) })
}

// expire closes ln if it is still parked: no listener came back for it.
func (k *socketKeeper) expire(ln *net.TCPListener) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ln != ln {
		return
	}
	_ = k.ln.Close()
	closeAll(k.conns)
	k.ln, k.conns, k.timer = nil, nil, nil
}

// close stops keeping sockets: the parked one is closed now, and one handed back later
// is closed at once.
func (k *socketKeeper) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	if k.ln != nil {
		_ = k.ln.Close()
		closeAll(k.conns)
		k.ln, k.conns = nil, nil
	}
}

func (k *socketKeeper) isClosed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.closed
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}

// socketView is one listener incarnation's use of a kept socket: its Close ends the
// incarnation's Accept (a deadline in the past wakes it) and leaves the socket open,
// unless the edge is stopping for good, when it closes the socket at once. A
// connection the kernel handed over just as the view closed is kept for the next
// incarnation instead of being dropped.
type socketView struct {
	ln      *net.TCPListener
	keeper  *socketKeeper
	pending []net.Conn // handed over by the previous incarnation, served first

	mu     sync.Mutex
	closed bool
	late   []net.Conn
}

func (v *socketView) Accept() (net.Conn, error) {
	v.mu.Lock()
	if len(v.pending) > 0 && !v.closed {
		c := v.pending[0]
		v.pending = v.pending[1:]
		v.mu.Unlock()
		return c, nil
	}
	v.mu.Unlock()
	c, err := v.ln.Accept()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		if err == nil {
			v.late = append(v.late, c)
		}
		return nil, net.ErrClosed
	}
	return c, err
}

func (v *socketView) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	if v.keeper.isClosed() {
		// A stop for good: the port refuses connections from now on, while the requests
		// in flight are still being answered.
		return v.ln.Close()
	}
	return v.ln.SetDeadline(time.Unix(1, 0))
}

func (v *socketView) Addr() net.Addr { return v.ln.Addr() }

// handBack returns the socket and the connections it still owes an answer to (accepted
// but never served); call it once the incarnation's serve loop has returned.
func (v *socketView) handBack() (*net.TCPListener, []net.Conn) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ln, append(v.pending, v.late...)
}
