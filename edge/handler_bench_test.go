package edge_test

import (
	"bytes"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/routes"
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

// BenchmarkIngestRouteGuard is BenchmarkIngestInProcess's path with routes.enabled: allowed, the hook passes
// the guard (global rules, a route with its own rules) and commits; refused, the guard answers 404 before
// anything else runs. allocs/op of allowed is the ingest path's plus the guard's (which allocates nothing).
func BenchmarkIngestRouteGuard(b *testing.B) {
	inst := start(b, func(c *config.Config) {
		c.Admin.Enabled = false
		c.Routes.Enabled = true
		c.Routes.IPRules = routes.RulesSpec{Default: "allow", Rules: []routes.RuleSpec{{Action: "deny", CIDR: "203.0.113.0/24"}}}
		c.Routes.Seed = []routes.Spec{
			{ID: "sample", Path: "/webhooks/:source", IPRules: &routes.RulesSpec{Default: "deny",
				Rules: []routes.RuleSpec{{Action: "allow", CIDR: "127.0.0.0/8"}}}},
			{ID: "other", Path: "/catch/*"},
		}
	}, nil)
	e := inst.Edge()
	body := bytes.Repeat([]byte("x"), 1024)
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	for _, c := range []struct {
		name, path string
		status     int
	}{{"allowed", "/webhooks/sample", 201}, {"refused", "/nowhere/at/all", 404}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32)
			b.SetBytes(int64(len(body)))
			b.RunParallel(func(pb *testing.PB) {
				var req fasthttp.Request
				req.Header.SetMethod("POST")
				req.SetRequestURI(c.path)
				req.Header.SetContentType("application/json")
				req.SetBody(body)
				req.Header.SetContentLength(len(body))
				var ctx fasthttp.RequestCtx
				for pb.Next() {
					ctx.Init(&req, addr, nil)
					e.Handle(&ctx)
					if ctx.Response.StatusCode() != c.status {
						b.Errorf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
						return
					}
				}
			})
		})
	}
}
