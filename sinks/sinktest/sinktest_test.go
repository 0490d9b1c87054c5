package sinktest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ankusa-go/ankusa/sinks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memory is an in-process destination; flaw selects one deliberate contract violation.
type memory struct {
	mu   sync.Mutex
	got  map[string][][]byte
	flaw string
	wg   sync.WaitGroup // late stores of the "early-nil" flaw
}

func (m *memory) New(t *testing.T) sinks.Sink {
	t.Cleanup(m.wg.Wait)
	return &memSink{m: m}
}
func (m *memory) Broken(*testing.T) sinks.Sink { return &memSink{m: m, broken: true} }
func (m *memory) Received(_ *testing.T, id string) ([][]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.got[id]
	return b, ok
}

type memSink struct {
	m      *memory
	broken bool
	closed bool
	mu     sync.Mutex
}

func (s *memSink) Durable() bool { return true }
func (s *memSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed && s.m.flaw == "close-twice-fails" {
		return errors.New("already closed")
	}
	s.closed = true
	return nil
}

func (s *memSink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	f := s.m.flaw
	if err := ctx.Err(); err != nil && f != "ignores-ctx" {
		return err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed && f != "delivers-after-close" {
		return sinks.ErrClosed
	}
	if s.broken {
		if f == "permanent-outage" {
			return sinks.Permanent(errors.New("refused"))
		}
		return errors.New("memory: unreachable")
	}
	body := append([]byte{}, e.Body...)
	switch f {
	case "retains-body":
		body = e.Body
	case "modifies-body":
		if len(e.Body) > 0 {
			e.Body[0]++
		}
	case "early-nil":
		s.m.wg.Add(1)
		go func() {
			defer s.m.wg.Done()
			time.Sleep(20 * time.Millisecond) // the flaw under test: the store lands after nil
			s.m.store(e.IDText, body)
		}()
		return nil
	case "drops-empty":
		if len(body) == 0 {
			return nil
		}
	}
	s.m.store(e.IDText, body)
	return nil
}

func (m *memory) store(id string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.got == nil {
		m.got = make(map[string][][]byte)
	}
	m.got[id] = append(m.got[id], b)
}

// A correct sink passes the suite.
func TestSuitePassesAConformingSink(t *testing.T) {
	Run(t, &memory{})
}

// TestFlawedMemorySink is the child half of TestSuiteFailsEachFlawedSink.
func TestFlawedMemorySink(t *testing.T) {
	flaw := os.Getenv("SINKTEST_FLAW")
	if flaw == "" {
		t.Skip("run by TestSuiteFailsEachFlawedSink")
	}
	Run(t, &memory{flaw: flaw})
}

// "No test that cannot fail": each contract violation makes the suite fail, in the case that guards it.
func TestSuiteFailsEachFlawedSink(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	for flaw, failing := range map[string]string{
		"retains-body":         "DeliveredBodyArrivesByteIdentical",
		"modifies-body":        "DeliveredBodyArrivesByteIdentical",
		"drops-empty":          "DeliveredBodyArrivesByteIdentical/size=0",
		"early-nil":            "NilOnlyAfterDestinationHasIt",
		"permanent-outage":     "BrokenDestinationIsNotPermanent",
		"ignores-ctx":          "CancelledContextReturnsPromptly",
		"close-twice-fails":    "CloseIsIdempotent",
		"delivers-after-close": "CloseIsIdempotent",
	} {
		t.Run(flaw, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestFlawedMemorySink$", "-test.v")
			cmd.Env = append(os.Environ(), "SINKTEST_FLAW="+flaw)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("suite passed a sink that %s:\n%s", flaw, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestFlawedMemorySink/"+failing) {
				t.Fatalf("suite did not fail in %s:\n%s", failing, out)
			}
		})
	}
}
