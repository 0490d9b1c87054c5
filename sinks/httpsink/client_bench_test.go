package httpsink

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkClientPOST compares the two client stacks the sink could run on, stripped of the sink's own work:
// net/http as the sink configures it (a request built per POST, the transport's reader and writer goroutines
// per connection) and fasthttp's HostClient (request and response objects reused, the POST written and read
// on the caller's goroutine), 1 KiB bodies to a fasthttp server on loopback, 32 POSTs in flight (the default
// dispatch.concurrency). It is the measurement behind the sink's choice of client (doc.go).
//
//	go test -run '^$' -bench ClientPOST -benchmem -cpu 2 ./sinks/httpsink/
func BenchmarkClientPOST(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(200) }, MaxIdleWorkerDuration: 100 * time.Millisecond}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	defer func() { _ = srv.Shutdown(); <-done }()
	url := "http://" + ln.Addr().String() + "/hooks"
	body := bytes.Repeat([]byte("a"), 1024)

	b.Run("net_http", func(b *testing.B) {
		tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, DisableCompression: true}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr}
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Ankusa-Id", "0190a6c4-7d2e-7b3c-9f00-0123456789ab")
				resp, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	})
	b.Run("fasthttp", func(b *testing.B) {
		c := &fasthttp.HostClient{Addr: ln.Addr().String(), MaxConns: 64}
		defer c.CloseIdleConnections()
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for pb.Next() {
				req.SetRequestURI(url)
				req.Header.SetMethod(fasthttp.MethodPost)
				req.Header.SetContentType("application/json")
				req.Header.Set("X-Ankusa-Id", "0190a6c4-7d2e-7b3c-9f00-0123456789ab")
				req.SetBodyRaw(body)
				if err := c.DoTimeout(req, resp, 5*time.Second); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
