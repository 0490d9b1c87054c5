package telemetry

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
)

// Ingest counts each request under its own source and outcome, whichever goroutine counts it first, and the
// looked-up children are the vector's own (what a scrape reads).
func TestIngestCountsBySourceAndOutcome(t *testing.T) {
	tel := New("t", zerolog.Nop())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				tel.Ingest("a", OutcomeCommitted, time.Millisecond)
				tel.Ingest("b", OutcomeCommitted, time.Millisecond)
				tel.Ingest("a", OutcomeDuplicate, time.Millisecond)
			}
		})
	}
	wg.Wait()
	for _, c := range []struct {
		source, outcome string
		want            float64
	}{{"a", OutcomeCommitted, 800}, {"b", OutcomeCommitted, 800}, {"a", OutcomeDuplicate, 800}, {"b", OutcomeDuplicate, 0}} {
		if got := testutil.ToFloat64(tel.Metrics.IngestRequests.WithLabelValues(c.source, c.outcome)); got != c.want {
			t.Errorf("ingest_requests{source=%q,outcome=%q} = %v, want %v", c.source, c.outcome, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { tel.Ingest("a", OutcomeCommitted, time.Millisecond) }); n != 0 {
		t.Errorf("counting a hook allocated %v times", n)
	}
}
