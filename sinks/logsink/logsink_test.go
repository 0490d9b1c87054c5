package logsink

import (
	"context"
	"github.com/ankusa-go/ankusa/test/capture"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSink(t *testing.T, buf *capture.Buffer) sinks.Sink {
	t.Helper()
	s, err := New(config.SinkSpec{Type: Type}, sinks.Deps{Instance: "n1", Log: zerolog.New(buf)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// target: "Received" reads the log output. The log keeps sizes, not bodies, so the suite runs its
// metadata-only variant (sizes compared, byte identity not checkable), and there is no broken destination:
// the sink cannot fail.
type target struct{ buf capture.Buffer }

func (tg *target) New(t *testing.T) sinks.Sink  { return newSink(t, &tg.buf) }
func (tg *target) Broken(*testing.T) sinks.Sink { return nil }
func (tg *target) MetadataOnly()                {}
func (tg *target) Received(t *testing.T, id string) ([][]byte, bool) {
	var got [][]byte
	for _, m := range tg.buf.Lines(t) {
		if m["id"] == id {
			size, _ := m["size"].(float64)
			got = append(got, make([]byte, int(size)))
		}
	}
	return got, got != nil
}

func TestConformance(t *testing.T) { sinktest.Run(t, &target{}) }

// Inventory D.2 log row: "logged (not durable)"; the log line holds metadata only, never the body or headers.
func TestLogsMetadataNeverBodyOrHeaders(t *testing.T) {
	var buf capture.Buffer
	s := newSink(t, &buf)
	defer s.Close()
	if s.Durable() {
		t.Fatal("log sink claims durability")
	}
	e := sinktest.Envelope([]byte(`{"card":"4111-BODY-MARKER"}`))
	e.Headers = []sinks.Header{{Name: "x-secret-header", Value: "HEADER-MARKER"}}
	e.ReplayID = "rp-7"
	e.Attempt = 3
	if err := s.Deliver(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	lines := buf.Lines(t)
	if len(lines) != 1 {
		t.Fatalf("%d log lines for one delivery", len(lines))
	}
	m := lines[0]
	want := map[string]any{"level": "info", "sink": "log", "id": e.IDText, "source": "sinktest", "tenant": "acme",
		"size": float64(len(e.Body)), "content_type": "application/octet-stream", "attempt": float64(3),
		"replay_id": "rp-7", "message": "hook delivered"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	raw := buf.String()
	for _, marker := range []string{"BODY-MARKER", "HEADER-MARKER", "x-secret-header"} {
		if strings.Contains(raw, marker) {
			t.Fatalf("log line holds %s: %s", marker, raw)
		}
	}
}

// The log sink takes no options: a typo is refused, not ignored.
func TestRejectsOptions(t *testing.T) {
	_, err := New(config.SinkSpec{Type: Type, Options: map[string]any{"level": "debug"}}, sinks.Deps{})
	if err == nil || !strings.Contains(err.Error(), "log sink: level: unknown option") {
		t.Fatalf("err = %v", err)
	}
}
