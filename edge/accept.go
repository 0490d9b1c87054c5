package edge

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/telemetry/task"
)

// acceptor wraps the ingest socket and does what fasthttp's accept loop cannot be told to:
//
//  1. An accept error the kernel clears by itself (out of file descriptors, buffers or
//     memory; an aborted handshake) is retried with back-off, 5 ms doubling to 1 s, instead
//     of ending the serve loop for good; /ready reports unavailable until an accept succeeds.
//  2. The node's connection cap (http.max_conns) answers 503 {"error":"overload"} +
//     Retry-After, the contract's answer, where fasthttp's Concurrency answers plain text.
//  3. One client address (an IPv6 /64) holds at most http.max_conns_per_ip connections;
//     past it 429 {"error":"too_many_connections"} + Retry-After.
//
// Refusals are written on the raw connection only when it is plain HTTP; a TLS client
// that has not finished its handshake is closed without an answer.
type acceptor struct {
	net.Listener
	health   *Health
	log      zerolog.Logger
	refused  func(reason string)
	maxConns int64
	maxPerIP int
	plain    bool

	open   atomic.Int64
	mu     sync.Mutex
	perIP  map[netip.Addr]int
	closed chan struct{}
	once   sync.Once
	// lingering counts refused connections being answered; each is bounded by
	// refuseLinger, and past maxLingering a refusal is a plain close.
	lingering atomic.Int64
	tasks     *task.Group
}

const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	refuseLinger     = time.Second
	maxLingering     = 256
)

func newAcceptor(ln net.Listener, e *Edge, plain bool, tasks *task.Group) *acceptor {
	return &acceptor{
		Listener: ln, health: e.health, log: e.log, refused: e.tel.Refused,
		maxConns: int64(e.set.MaxConns), maxPerIP: e.set.MaxConnsPerIP, plain: plain,
		perIP: map[netip.Addr]int{}, closed: make(chan struct{}), tasks: tasks,
	}
}

// Accept returns the next admitted connection. Only a permanent error or Close ends it.
func (a *acceptor) Accept() (net.Conn, error) {
	var delay time.Duration
	failures := 0
	for {
		c, err := a.Listener.Accept()
		if err != nil {
			select {
			case <-a.closed:
				return nil, net.ErrClosed
			default:
			}
			if !retryableAccept(err) {
				return nil, err
			}
			if failures == 0 {
				a.log.Warn().Err(err).Msg("ingest cannot accept connections; retrying with back-off")
			}
			failures++
			a.health.SetAccepting(false)
			delay = min(max(delay*2, acceptBackoffMin), acceptBackoffMax)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-a.closed:
				t.Stop()
				return nil, net.ErrClosed
			}
			continue
		}
		if failures > 0 {
			a.log.Info().Int("failed_accepts", failures).Msg("ingest accepts connections again")
			failures, delay = 0, 0
		}
		a.health.SetAccepting(true)
		if tc := a.admit(c); tc != nil {
			return tc, nil
		}
	}
}

// Close closes the socket and wakes an Accept sleeping in its back-off.
func (a *acceptor) Close() error {
	a.once.Do(func() { close(a.closed) })
	return a.Listener.Close()
}

// drained reports that the acceptor was closed and every connection it admitted is closed.
func (a *acceptor) drained() bool {
	select {
	case <-a.closed:
		return a.open.Load() == 0
	default:
		return false
	}
}

// admit counts a new connection against the node's and its address's caps.
func (a *acceptor) admit(c net.Conn) net.Conn {
	if a.open.Add(1) > a.maxConns {
		a.open.Add(-1)
		a.refuse(c, refuseOverload)
		return nil
	}
	tc := &trackedConn{Conn: c, a: a}
	if a.maxPerIP > 0 {
		tc.key, tc.keyed = clientKey(c.RemoteAddr())
	}
	if tc.keyed {
		a.mu.Lock()
		n := a.perIP[tc.key]
		if n >= a.maxPerIP {
			a.mu.Unlock()
			a.open.Add(-1)
			a.refuse(c, refuseTooManyConns)
			return nil
		}
		a.perIP[tc.key] = n + 1
		a.mu.Unlock()
	}
	return tc
}

func (a *acceptor) release(tc *trackedConn) {
	a.open.Add(-1)
	if !tc.keyed {
		return
	}
	a.mu.Lock()
	if n := a.perIP[tc.key] - 1; n > 0 {
		a.perIP[tc.key] = n
	} else {
		delete(a.perIP, tc.key)
	}
	a.mu.Unlock()
}

// refuse answers a connection the caps turned away and closes it. The answer is written,
// the write side shut and what the client already sent drained for up to refuseLinger,
// so the client reads the refusal instead of a reset.
func (a *acceptor) refuse(c net.Conn, r *RefusedError) {
	a.refused(r.Reason)
	if !a.plain || a.lingering.Add(1) > maxLingering {
		if a.plain {
			a.lingering.Add(-1)
		}
		_ = c.Close()
		return
	}
	started := a.tasks.Go(func(<-chan struct{}) {
		defer a.lingering.Add(-1)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refuseLinger))
		if _, err := c.Write(rawRefusal(r)); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		var buf [4096]byte
		for {
			if _, err := c.Read(buf[:]); err != nil {
				return
			}
		}
	})
	if !started {
		a.lingering.Add(-1)
		_ = c.Close()
	}
}

// rawRefusal is a whole HTTP/1.1 response carrying r, for a connection no request was
// read from.
func rawRefusal(r *RefusedError) []byte {
	body := `{"error":"` + r.Reason + `"}`
	s := "HTTP/1.1 " + strconv.Itoa(r.Status) + " " + statusText(r.Status) + "\r\n" +
		"Content-Type: application/json\r\nConnection: close\r\n"
	if r.RetryAfter > 0 {
		s += "Retry-After: " + strconv.Itoa(r.RetryAfter) + "\r\n"
	}
	return []byte(s + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

func statusText(status int) string {
	switch status {
	case 429:
		return "Too Many Requests"
	case 503:
		return "Service Unavailable"
	}
	return "Error"
}

// trackedConn gives its slot back once, when fasthttp closes it, and keeps its deadlines lazily (lazyDeadline).
type trackedConn struct {
	net.Conn
	a      *acceptor
	key    netip.Addr
	keyed  bool
	once   sync.Once
	rd, wd lazyDeadline
}

func (c *trackedConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if n > 0 || err == nil || !c.rd.early(err, c.Conn.SetReadDeadline) {
			return n, err
		}
	}
}

func (c *trackedConn) Write(p []byte) (int, error) {
	written := 0
	for {
		n, err := c.Conn.Write(p[written:])
		written += n
		if err == nil || !c.wd.early(err, c.Conn.SetWriteDeadline) {
			return written, err
		}
		if written == len(p) {
			return written, nil
		}
	}
}

func (c *trackedConn) SetReadDeadline(t time.Time) error { return c.rd.set(t, c.Conn.SetReadDeadline) }

func (c *trackedConn) SetWriteDeadline(t time.Time) error {
	return c.wd.set(t, c.Conn.SetWriteDeadline)
}

func (c *trackedConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.a.release(c) })
	return c.Conn.Close()
}

// clientKey is the address a connection counts against: the IPv4 address, or the /64
// of an IPv6 one (one host usually holds a whole /64).
func clientKey(addr net.Addr) (netip.Addr, bool) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Addr{}, false
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, err := ip.Prefix(64)
		if err != nil {
			return netip.Addr{}, false
		}
		ip = p.Addr()
	}
	return ip, true
}

// retryableAccept reports an accept error that goes away by itself: the process or the
// system ran out of descriptors, buffers or memory, or one handshake was aborted.
func retryableAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO, syscall.EINTR} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}
