package edge_test

import (
	"bufio"
	"fmt"
	"github.com/ankusa-go/ankusa/test/capture"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/actors"
	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/poll"
)

// firstAnswer sends req on a fresh connection and reads the first answer, whatever its
// status (a 100 Continue included).
func firstAnswer(t *testing.T, addr, req string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	c := dial(t, addr)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return resp, c, br
}

// Design: refusals that need no body come before the body is read. A client that sent
// Expect: 100-continue gets the refusal in place of 100 Continue, and 100 Continue
// only when the request will be read (issue 8, item 12).
func TestExpectContinueAnsweredAfterPreReadRefusals(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		c.HTTP.MaxBodyBytes, c.HTTP.MaxReadingBytesPerIP = 20000, 30000
	}, nil)
	f := func(path, length string, status int, reason string) {
		t.Helper()
		resp, _, _ := firstAnswer(t, inst.IngestAddr(), "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
			length+"Expect: 100-continue\r\n\r\n")
		defer resp.Body.Close()
		r := toReply(t, resp)
		r.expect(t, status, reason)
	}
	f("/webhooks/nope", "Content-Length: 2\r\n", 404, "unknown_source")
	f("/webhooks/sample", "Content-Length: 999999\r\n", 413, "payload_too_large")
	f("/webhooks/sample", "", 411, "length_required")
	// A stalled upload holds 20000 bytes of the address's 30000: the next 15000 would not fit.
	stalled := dial(t, inst.IngestAddr())
	_, _ = io.WriteString(stalled, "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n"+strings.Repeat("s", 10000))
	poll.True(t, 10*time.Second, "stalled upload reserved", func() bool { return inst.Edge().Reading() == 20000 })
	f("/webhooks/sample", "Content-Length: 15000\r\n", 429, "ip_overload")
	_ = stalled.Close()
	poll.True(t, 10*time.Second, "stalled upload released", func() bool { return inst.Edge().Reading() == 0 })

	resp, c, br := firstAnswer(t, inst.IngestAddr(), "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
	_ = resp.Body.Close()
	if resp.StatusCode != 100 {
		t.Fatalf("a request that will be read got %d before its body, want 100", resp.StatusCode)
	}
	if _, err := io.WriteString(c, "{}"); err != nil {
		t.Fatal(err)
	}
	final, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	toReply(t, final).expect(t, 201, "")
	_ = final.Body.Close()
	// The next request on the connection meets every check again.
	if _, err := io.WriteString(c, "POST /webhooks/nope HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	next, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Body.Close()
	toReply(t, next).expect(t, 404, "unknown_source")
}

// A body that breaks off is 400 body_read_failed with no detail: the network layer's
// error text names the node's addresses (issue 8, item 12).
func TestBodyReadFailedNamesNoAddress(t *testing.T) {
	inst := start(t, nil, nil)
	// A chunked body read by the handler (past what fasthttp reads up front) that ends early.
	req := "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"10\r\n0123456789abcdef\r\n10\r\n01234"
	r := raw(t, inst.IngestAddr(), req, true)
	r.expect(t, 400, "body_read_failed")
	host, _, _ := net.SplitHostPort(inst.IngestAddr())
	if strings.Contains(string(r.raw), host) || len(r.body) != 1 {
		t.Fatalf("body_read_failed says more than its reason: %s", r.raw)
	}
}

// Design: an unframed POST (no Content-Length, not chunked) is 411 length_required,
// never an empty hook stored with 201 (issue 8, item 12).
func TestUnframedPostIsLengthRequired(t *testing.T) {
	inst := start(t, nil, nil)
	raw(t, inst.IngestAddr(), "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", true).expect(t, 411, "length_required")
	if n := len(hooks(t, inst)); n != 0 {
		t.Fatalf("%d hooks stored from an unframed POST", n)
	}
	// An explicit empty body is framed and stored.
	raw(t, inst.IngestAddr(), "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", true).expect(t, 201, "")
}

// Chunked trailers are never validated or stored, so verification does not read them: a
// signature sent only as a trailer is no signature (issue 8, item 12).
func TestTrailersAreNotHeadersForVerification(t *testing.T) {
	inst := start(t, func(c *config.Config) { c.Sources["gh"] = ghSource("acme", "reject") }, nil)
	body := `{"action":"opened"}`
	chunked := func(sigHead, sigTrailer string) string {
		return "POST /webhooks/gh HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n" + sigHead +
			"Trailer: X-Hub-Signature-256\r\nConnection: close\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n", len(body), body) + sigTrailer + "\r\n"
	}
	sig := "X-Hub-Signature-256: " + ghSign([]byte(body)) + "\r\n"
	raw(t, inst.IngestAddr(), chunked(sig, ""), false).expect(t, 201, "")
	raw(t, inst.IngestAddr(), chunked("", sig), false).expect(t, 401, "verification_failed")
}

// panickingSources is a source store that panics, standing in for any defect on the
// ingest path.
type panickingSources struct{}

func (panickingSources) Lookup([]byte) (*edge.Source, error) { panic("source store defect") }

// A panic in the ingest handler answers 500 internal, is counted and logged without
// the request, and the server goes on answering (issue 8, item 12).
func TestIngestPanicAnswers500AndServes(t *testing.T) {
	logs := &capture.Buffer{}
	system := actors.NewSystem("edge", zerolog.New(logs))
	t.Cleanup(system.Shutdown)
	tel := telemetry.New("edge", zerolog.New(logs))
	set := edge.SettingsFrom(config.Default())
	set.Partitions = 1
	e := edge.New(set, system, edge.NewResolver("path", "/webhooks"), panickingSources{}, tel, &edge.Health{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: e.Handle, NoDefaultDate: true}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Shutdown()
		<-served
	})
	for range 2 {
		r := raw(t, ln.Addr().String(), "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nAuthorization: Bearer panic-secret\r\n\r\nbody-secret", false)
		r.expect(t, 500, "internal")
	}
	if n := counterValue(t, tel, "ankusa_ingest_panics_total"); n != 2 {
		t.Fatalf("ankusa_ingest_panics_total = %v, want 2", n)
	}
	out := logs.String()
	if !strings.Contains(out, "ingest handler panicked") || strings.Contains(out, "panic-secret") || strings.Contains(out, "body-secret") {
		t.Fatalf("panic log: %s", out)
	}
}

func counterValue(t *testing.T, tel *telemetry.Telemetry, name string) float64 {
	t.Helper()
	fams, err := tel.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}
