package httpsink

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

const (
	// idleTimeout is how long an idle connection is kept for the next attempt.
	idleTimeout = 90 * time.Second
	// maxIdle bounds the idle connections kept: more attempts than this never run at once in a lane.
	maxIdle = 256
	// bufSize is each connection's read buffer and its request writer's.
	bufSize = 8 << 10
	// gatherMax is the largest body whose request is gathered and sent with one write (send). The gathered
	// bytes stay with the connection for its next request, so this bounds what an idle connection holds.
	gatherMax = 16 << 10
)

// conn is one keep-alive connection with its buffers.
type conn struct {
	c      net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer // writes into out, or into c for a request too big to gather
	out    outBuf
	used   time.Time
	reused bool // taken from the pool: the destination may have closed it meanwhile
}

// outBuf collects a request's bytes.
type outBuf struct{ b []byte }

func (o *outBuf) Write(p []byte) (int, error) {
	o.b = append(o.b, p...)
	return len(p), nil
}

// send writes req to the connection. A request whose body is at most gatherMax is gathered and sent with one
// write: straight through the buffered writer, a body past the buffer's room cost a write for the buffer and
// another for the rest, two syscalls for a 10 KiB hook where one will do. A bigger one is streamed in
// buffer-sized writes rather than held whole.
func (c *conn) send(req *fasthttp.Request) error {
	if len(req.Body()) > gatherMax {
		c.bw.Reset(c.c)
		defer c.bw.Reset(&c.out)
		if err := req.Write(c.bw); err != nil {
			return err
		}
		return c.bw.Flush()
	}
	c.out.b = c.out.b[:0]
	if err := req.Write(c.bw); err != nil {
		c.bw.Reset(&c.out)
		return err
	}
	if err := c.bw.Flush(); err != nil {
		return err
	}
	_, err := c.c.Write(c.out.b)
	return err
}

// connPool keeps the sink's idle connections to its one destination. It starts no goroutine: a connection idle
// past idleTimeout is closed by the get that finds it, and the pool's idle connections by close. An attempt
// owns its connection from get to put (or drop), so a connection never carries two requests at once.
type connPool struct {
	addr string
	tls  *tls.Config // nil: plain HTTP
	dial func(ctx context.Context, addr string) (net.Conn, error)

	mu     sync.Mutex
	idle   []*conn
	closed bool
}

// get returns the most recently used idle connection, or a new one dialled before dl.
func (p *connPool) get(ctx context.Context, dl time.Time, now time.Time) (*conn, error) {
	p.mu.Lock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if now.Sub(c.used) < idleTimeout {
			p.mu.Unlock()
			c.reused = true
			return c, nil
		}
		_ = c.c.Close()
	}
	p.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()
	return p.fresh(ctx)
}

// fresh dials a new connection (and shakes hands for https).
func (p *connPool) fresh(ctx context.Context) (*conn, error) {
	nc, err := p.dial(ctx, p.addr)
	if err != nil {
		return nil, err
	}
	if p.tls != nil {
		tc := tls.Client(nc, p.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		nc = tc
	}
	c := &conn{c: nc, br: bufio.NewReaderSize(nc, bufSize)}
	c.bw = bufio.NewWriterSize(&c.out, bufSize)
	return c, nil
}

// put gives c back for the next attempt; after close, or beyond maxIdle, it is closed instead.
func (p *connPool) put(c *conn, now time.Time) {
	c.used, c.reused = now, false
	p.mu.Lock()
	if p.closed || len(p.idle) >= maxIdle {
		p.mu.Unlock()
		_ = c.c.Close()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// drop closes c: its state is unknown (an error, an unread answer, a cancelled attempt).
func (p *connPool) drop(c *conn) { _ = c.c.Close() }

// close closes the idle connections and makes put close from then on.
func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.c.Close()
	}
}
