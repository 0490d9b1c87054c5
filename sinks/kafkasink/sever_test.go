package kafkasink

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/poll"
)

// severable records the connections its listeners accept, so a test can cut them all from the brokers' side
// while the brokers keep running: what a network cut or an idle-connection reaper does. (sinktest's Proxy
// cannot stand in front of a Kafka cluster: the brokers' metadata sends clients to the brokers' own
// addresses.)
type severable struct {
	mu    sync.Mutex
	conns []net.Conn
	cuts  int
}

func (s *severable) listen(network, addr string) (net.Listener, error) {
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return &recordingListener{Listener: l, s: s}, nil
}

// sever closes every connection accepted so far and reports how many.
func (s *severable) sever() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.conns)
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
	s.cuts++
	return n
}

type recordingListener struct {
	net.Listener
	s *severable
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.s.mu.Lock()
		l.s.conns = append(l.s.conns, c)
		l.s.mu.Unlock()
	}
	return c, err
}

// Design §6: "connection handling (connect, reconnect with back-off) inside the sink". Every connection of
// the sink is cut, twice in a row: the same sink delivers again on its own, and an attempt caught by the cut
// either failed (retried by dispatch) or is in the topic — never nil without the record.
func TestConnectionDropReconnects(t *testing.T) {
	sv := &severable{}
	c := newCluster(t, kfake.ListenFn(sv.listen))
	s := newTestSink(t, c.ListenAddrs(), map[string]any{"produce_timeout_ms": 2000})
	cons := newConsumer(t, c.ListenAddrs(), testTopic)
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("before")), 10*time.Second); err != nil {
		t.Fatal(err)
	}

	const n = 16
	type res struct {
		body []byte
		id   string
		err  error
	}
	out := make(chan res, n)
	for i := 0; i < n; i++ {
		e := sinktest.Envelope([]byte{byte(i)})
		go func() { out <- res{e.Body, e.IDText, sinktest.Deliver(s, e, 10*time.Second)} }()
	}
	if cut := sv.sever(); cut == 0 {
		t.Fatal("no connection to cut")
	}
	sv.sever()
	for i := 0; i < n; i++ {
		r := <-out
		if r.err != nil {
			continue // a failed attempt is retried by dispatch
		}
		got, err := cons.bodies(r.id)
		if err != nil || len(got) == 0 || !bytes.Equal(got[0], r.body) {
			t.Fatalf("Deliver returned nil for %s but the topic has %d copies (err %v)", r.id, len(got), err)
		}
	}
	after := sinktest.Envelope([]byte("after the cut"))
	poll.Eventually(t, 10*time.Second, func() error { return sinktest.Deliver(s, after, 3*time.Second) })
	if got, err := cons.bodies(after.IDText); err != nil || len(got) == 0 {
		t.Fatalf("after the cut: %d copies, err %v", len(got), err)
	}
}
