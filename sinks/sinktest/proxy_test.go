package sinktest

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/sinks"
)

// lineStore is a destination over TCP: each line "<id> <base64 body>" is stored and answered "ok".
type lineStore struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	got  map[string][][]byte
	open map[net.Conn]struct{}
	flaw string
}

func newLineStore(t *testing.T, flaw string) *lineStore {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := &lineStore{ln: ln, got: make(map[string][][]byte), open: make(map[net.Conn]struct{}), flaw: flaw}
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			st.mu.Lock()
			st.open[c] = struct{}{}
			st.mu.Unlock()
			st.wg.Add(1)
			go st.serve(c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		st.mu.Lock()
		for c := range st.open {
			_ = c.Close()
		}
		st.mu.Unlock()
		st.wg.Wait()
	})
	return st
}

func (st *lineStore) serve(c net.Conn) {
	defer st.wg.Done()
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		id, enc, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		body, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return
		}
		st.mu.Lock()
		st.got[id] = append(st.got[id], body)
		st.mu.Unlock()
		if _, err := c.Write([]byte("ok\n")); err != nil {
			return
		}
	}
}

func (st *lineStore) New(t *testing.T) sinks.Sink { return st.NewAt(t, st.Upstream()) }
func (st *lineStore) Upstream() string            { return st.ln.Addr().String() }
func (st *lineStore) NewAt(_ *testing.T, addr string) sinks.Sink {
	return &lineSink{addr: addr, flaw: st.flaw}
}
func (st *lineStore) Broken(*testing.T) sinks.Sink { return &lineSink{addr: "127.0.0.1:1"} }
func (st *lineStore) Received(_ *testing.T, id string) ([][]byte, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	b, ok := st.got[id]
	return b, ok
}
func (st *lineStore) KeepsHooks() bool { return st.flaw != "lies-durable" }

// lineSink holds one connection, dialled lazily and (unless a flaw says otherwise) dropped on any error so
// the next attempt redials.
type lineSink struct {
	addr   string
	flaw   string
	mu     sync.Mutex
	conn   net.Conn
	r      *bufio.Reader
	closed bool
}

func (s *lineSink) Durable() bool { return true }

func (s *lineSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
	return nil
}

func (s *lineSink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sinks.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.conn == nil {
		if s.flaw == "never-reconnects" && s.r != nil {
			return errors.New("line: connection lost")
		}
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.addr)
		if err != nil {
			return s.fail(err)
		}
		s.conn, s.r = c, bufio.NewReader(c)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.conn.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(s.conn, "%s %s\n", e.IDText, base64.StdEncoding.EncodeToString(e.Body)); err != nil {
		return s.drop(err)
	}
	line, err := s.r.ReadString('\n')
	if err != nil || line != "ok\n" {
		return s.drop(fmt.Errorf("line: no ok: %w", err))
	}
	return nil
}

func (s *lineSink) drop(err error) error {
	if s.flaw != "never-reconnects" {
		_ = s.conn.Close()
		s.conn = nil
	}
	return s.fail(err)
}

func (s *lineSink) fail(err error) error {
	if s.flaw == "permanent-on-drop" {
		return sinks.Permanent(err)
	}
	return err
}

// A sink that redials after a cut passes the whole suite, the connection cases included.
func TestSuitePassesAReconnectingSink(t *testing.T) {
	Run(t, newLineStore(t, ""))
}

// TestFlawedTCPSink is the child half of TestSuiteFailsEachFlawedTCPSink.
func TestFlawedTCPSink(t *testing.T) {
	flaw := os.Getenv("SINKTEST_TCP_FLAW")
	if flaw == "" {
		t.Skip("run by TestSuiteFailsEachFlawedTCPSink")
	}
	Run(t, newLineStore(t, flaw))
}

// "No test that cannot fail": the connection and durability cases each fail the sink that breaks them.
func TestSuiteFailsEachFlawedTCPSink(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	for flaw, failing := range map[string]string{
		"never-reconnects":  "ReconnectsAfterConnectionDrop",
		"permanent-on-drop": "ReconnectsAfterConnectionDrop",
		"lies-durable":      "DurableTellsTheTruth",
	} {
		t.Run(flaw, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestFlawedTCPSink$", "-test.v", "-test.failfast")
			cmd.Env = append(os.Environ(), "SINKTEST_TCP_FLAW="+flaw)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("suite passed a sink with flaw %s:\n%s", flaw, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestFlawedTCPSink/"+failing) {
				t.Fatalf("suite did not fail in %s:\n%s", failing, out)
			}
		})
	}
}

// Pause refuses new connections and Resume lets them through again; Close waits for every path.
func TestProxyPauseResume(t *testing.T) {
	st := newLineStore(t, "")
	p := NewProxy(t, st.Upstream())
	s := st.NewAt(t, p.Addr())
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Deliver(ctx, Envelope([]byte("a"))); err != nil {
		t.Fatal(err)
	}
	p.Pause()
	if err := s.Deliver(ctx, Envelope([]byte("b"))); err == nil {
		t.Fatal("delivered through a paused proxy")
	}
	if err := s.Deliver(ctx, Envelope([]byte("c"))); err == nil {
		t.Fatal("a new connection got through a paused proxy")
	}
	p.Resume()
	if err := s.Deliver(ctx, Envelope([]byte("d"))); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	p.Close()
	p.Close()
}
