package sinktest

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on a random loopback port in front of a real broker, for the connection-drop cases:
// a broker sink's test points the sink at Addr and cuts or refuses the path while the broker keeps running.
// Its goroutines are owned by the test: t.Cleanup closes it and waits for all of them.
type Proxy struct {
	upstream string
	ln       net.Listener
	wg       sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // both sides of every open path
	paused bool
	closed bool
}

// proxyDial bounds the dial to the upstream; it is on loopback.
const proxyDial = 5 * time.Second

// NewProxy starts a proxy to upstream (host:port) and closes it when the test ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sinktest: cannot listen for the proxy: %v", err)
	}
	p := &Proxy{upstream: upstream, ln: ln, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Sever cuts every open connection, both sides, as a broker restart or a network cut would. New connections
// are accepted as before.
func (p *Proxy) Sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.severLocked()
}

// Pause severs every connection and refuses new ones (each is closed as soon as it is accepted) until
// Resume: the broker is unreachable for a while.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	p.severLocked()
}

// Resume accepts connections again after Pause.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// Close stops the proxy, cuts every connection and waits for its goroutines. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		_ = p.ln.Close()
		p.severLocked()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) severLocked() {
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient accept error (EMFILE, aborted handshake): keep serving
		}
		p.mu.Lock()
		if p.paused || p.closed {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// serve dials the upstream for c and copies both ways until either side ends or the path is severed.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	u, err := net.DialTimeout("tcp", p.upstream, proxyDial)
	p.mu.Lock()
	_, alive := p.conns[c] // severed while dialling: drop the new path too
	if err != nil || !alive {
		delete(p.conns, c)
		p.mu.Unlock()
		_ = c.Close()
		if u != nil {
			_ = u.Close()
		}
		return
	}
	p.conns[u] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(u, c)
		p.drop(c, u)
	}()
	_, _ = io.Copy(c, u)
	p.drop(c, u)
}

func (p *Proxy) drop(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}
