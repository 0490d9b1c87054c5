package edge_test

import (
	"bytes"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkIngestInProcess drives the ingest handler directly (no sockets) through the
// real batchers, writer and a synced RocksDB commit, 64 requests in flight, with 1 KB
// bodies. allocs/op is the per-hook allocation count of the in-process path (the
// figure the hot path is held to); ns/op is throughput-bound by group commits.
func BenchmarkIngestInProcess(b *testing.B) {
	inst := startB(b)
	e := inst.Edge()
	body := bytes.Repeat([]byte("x"), 1024)
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	b.ReportAllocs()
	b.SetParallelism(32) // 32 × GOMAXPROCS(2) = 64 in flight
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI("/webhooks/sample")
		req.Header.SetContentType("application/json")
		req.Header.Set("X-Provider-Event", "push")
		req.SetBody(body)
		req.Header.SetContentLength(len(body)) // as a framed request read off the wire
		var ctx fasthttp.RequestCtx
		for pb.Next() {
			ctx.Init(&req, addr, nil)
			e.Handle(&ctx)
			if ctx.Response.StatusCode() != 201 {
				b.Errorf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
				return
			}
		}
	})
}
