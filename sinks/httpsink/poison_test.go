package httpsink

import (
	"errors"
	"net/http"
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// Issue 8 item 9: a dedupe key, tenant or content type holding control characters is sent percent-encoded,
// so the attempt succeeds instead of failing on every retry.
func TestControlBytesInHookValuesAreEncoded(t *testing.T) {
	rec := newRecorder(t, nil)
	s := newSink(t, map[string]any{"url": rec.srv.URL})
	e := sinktest.Envelope([]byte("x"))
	e.DedupeKey, e.Tenant, e.ContentType = "k\n\x00x", "t\r\n", "text/plain\x00"
	if err := deliver(t, s, e); err != nil {
		t.Fatalf("Deliver = %v", err)
	}
	h := rec.requests()[0].Header
	for k, want := range map[string]string{
		"X-Ankusa-Dedupe-Key":      "k%0A%00x",
		"X-Ankusa-Tenant":          "t%0D%0A",
		"X-Ankusa-Idempotency-Key": "t%0D%0A:sinktest:k%0A%00x",
		"Content-Type":             "text/plain%00",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

// Issue 8 item 9: a request the sink can never build is Permanent, never Transient, and its error names the
// header, not the value.
func TestUnbuildableRequestIsPermanent(t *testing.T) {
	err := checkHeader(http.Header{"X-Bad": {"ok", "v\nsecret"}})
	if !errors.Is(err, errUnbuildable) {
		t.Fatalf("checkHeader = %v", err)
	}
	if cl, _ := sinks.Classify(sinks.Permanent(err)); cl != sinks.PermanentClass {
		t.Fatal("not permanent")
	}
	if err := checkHeader(http.Header{"Bad Name": {"v"}}); !errors.Is(err, errUnbuildable) {
		t.Fatalf("bad name: %v", err)
	}
	if err := checkHeader(http.Header{"X-Ok": {"a\tb"}}); err != nil {
		t.Fatalf("a tab was refused: %v", err)
	}

	// Through Deliver: a static header that slipped past validation (a sink built in code) fails the attempt
	// as Permanent before any byte is sent.
	rec := newRecorder(t, nil)
	snk := newSink(t, map[string]any{"url": rec.srv.URL}).(*sink)
	snk.static = append(snk.static, header{"X-Static", "v\x00"})
	err = deliver(t, snk, sinktest.Envelope([]byte("x")))
	if cl, _ := sinks.Classify(err); cl != sinks.PermanentClass {
		t.Fatalf("Deliver = %v (%s), want permanent", err, cl)
	}
	if len(rec.requests()) != 0 {
		t.Fatal("an unbuildable request reached the destination")
	}
}
