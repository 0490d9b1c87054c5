package edge

import (
	"net/netip"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/routes"
)

// The route guard (routes.enabled; inventory A.2 step 1): the first check of every request but the probes.
// It reads the method, the path, the socket's peer and, behind a trusted proxy, X-Forwarded-For; nothing of
// the body. No route, or a route with other methods, is 404 not_found; an address the rules deny is
// routes.ip_denied_status (403 forbidden or 404 not_found). The table is the instance's (routes.Table): a
// change published there applies to the next request.

var refuseForbidden = &RefusedError{Status: 403, Reason: "forbidden"}

type routeGuard struct {
	table  *routes.Table
	denied *RefusedError
	sample uint64 // 1 in sample refusals logged at debug; 0 none
	n      atomic.Uint64
}

// SetRoutes turns the route guard on over table; deniedStatus is 403 or 404 (routes.ip_denied_status) and
// logSample routes.log_sample. It is called before the listener starts.
func (e *Edge) SetRoutes(table *routes.Table, deniedStatus, logSample int) {
	g := &routeGuard{table: table, denied: refuseForbidden, sample: uint64(max(logSample, 0))}
	if deniedStatus == 404 {
		g.denied = refuseNotFound
	}
	e.guard = g
}

// checkRoute is the guard's verdict on the request: nil lets it go on.
func (e *Edge) checkRoute(ctx *fasthttp.RequestCtx) *RefusedError {
	g := e.guard
	s := g.table.Load()
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	ip := peer
	if len(s.Proxies()) > 0 {
		ip = routes.ClientIP(peer, ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedFor), s.Proxies())
	} else {
		ip = ip.Unmap()
	}
	d := s.Decide(ctx.Method(), ctx.Path(), ip)
	e.tel.RouteDecision(d.Reason)
	if d.Allow {
		return nil
	}
	r := refuseNotFound
	if d.Reason == routes.ReasonIPDenied {
		r = g.denied
	}
	if g.sample > 0 && g.n.Add(1)%g.sample == 1%g.sample {
		ev := e.log.Debug().Str("reason", d.Reason).Bytes("method", ctx.Method()).Str("client", ip.String())
		if p := ctx.Path(); len(p) > 200 {
			ev = ev.Bytes("path", p[:200])
		} else {
			ev = ev.Bytes("path", p)
		}
		if d.Route != nil {
			ev = ev.Str("route_id", d.Route.ID)
		}
		ev.Msg("route guard refused a request")
	}
	return r
}
